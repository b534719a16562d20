// The process's UCP context, and what UCX finds on this host.
//
// One context serves every UCX communicator of the process (each has a worker of its own): tag
// matching and wakeup, with KEEPALIVE_INTERVAL=1s (20 s by default) applied through
// ucp_config_modify unless the environment sets it: how soon an endpoint with peer error
// handling (to another host, worker.h) sees a peer that went silent.
#ifndef SHARDKIT_BACKENDS_UCX_INTERNAL_UCX_CONTEXT_H_
#define SHARDKIT_BACKENDS_UCX_INTERNAL_UCX_CONTEXT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/ucx/internal/ucp_library.h"

namespace shardkit::ucx_backend {

struct UcxContext {
  const UcpLibrary* ucp = nullptr;
  ucp_context_h context = nullptr;
};

// The shared context, created on first use after the check of UCX_TLS (CheckRequestedTransports).
// Errors: LoadUcp's; kFailedPrecondition for a UCX_TLS naming a transport this host lacks;
// kInternal with UCX's words when ucp_init fails.
[[nodiscard]] absl::StatusOr<UcxContext> SharedContext();

// The transports UCX finds on this host, whatever UCX_TLS says, in UCX's order and without
// repeats: {"self", "tcp", "sysv", "posix", "cma"}.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> HostTransports();

// The transports named in ucp_context_print_info's text (its "resource" lines).
std::vector<std::string> TransportsInInfo(const std::string& info);

// OK when every transport `ucx_tls` (UCX_TLS's value; null or "" when unset) asks for is in
// `found`, by name or by one of UCX's aliases (sm, shm, mm, ib, rc, ud, dc, …); a list that
// excludes ("^tcp") and "all" ask for nothing. Errors: kFailedPrecondition (the CLI's exit 1)
// `UCX_TLS asks for rc, which this host lacks (found: self, tcp, sysv, posix, cma)`.
[[nodiscard]] absl::Status CheckRequestedTransports(const std::vector<std::string>& found,
                                                    const char* ucx_tls);

// Whether `ucx_tls` (UCX_TLS's value; null when unset) lets UCX use shared memory or CMA.
bool SharedMemoryAllowed(const char* ucx_tls);

// The plugin's describe function (core/comm/backend_plugin.h): "transports: self, tcp, …" and 0,
// or the reason UCX cannot be used here and 1.
int DescribeUcx(char* text, size_t capacity);

}  // namespace shardkit::ucx_backend

#endif  // SHARDKIT_BACKENDS_UCX_INTERNAL_UCX_CONTEXT_H_
