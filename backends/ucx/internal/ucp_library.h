// The UCP functions the UCX backend calls, resolved from UCX's libucp.so.0 at run time.
//
// UCX is opened with dlopen, not linked: its base library reads its process-wide options (signal
// handlers, memory hooks) when it is loaded, and every shardkit program loads every plugin
// (`shardkit --version`), so the plugin sets its defaults first (SetUcxDefaults) and loads UCX only
// when it is first needed. Its headers are used for the types only.
//
//   SHARDKIT_ASSIGN_OR_RETURN(const UcpLibrary* ucp, LoadUcp());
//   ucp->worker_progress(worker);
#ifndef SHARDKIT_BACKENDS_UCX_INTERNAL_UCP_LIBRARY_H_
#define SHARDKIT_BACKENDS_UCX_INTERNAL_UCP_LIBRARY_H_

#include <ucp/api/ucp.h>

#include <cstdio>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace shardkit::ucx_backend {

struct UcpLibrary {
  decltype(&ucp_config_read) config_read;
  decltype(&ucp_config_modify) config_modify;
  decltype(&ucp_config_release) config_release;
  decltype(&ucp_init_version) init_version;
  decltype(&ucp_cleanup) cleanup;
  decltype(&ucp_context_print_info) context_print_info;
  decltype(&ucp_worker_create) worker_create;
  decltype(&ucp_worker_destroy) worker_destroy;
  decltype(&ucp_worker_get_address) worker_get_address;
  decltype(&ucp_worker_release_address) worker_release_address;
  decltype(&ucp_worker_progress) worker_progress;
  decltype(&ucp_worker_arm) worker_arm;
  decltype(&ucp_worker_get_efd) worker_get_efd;
  decltype(&ucp_ep_create) ep_create;
  decltype(&ucp_ep_close_nbx) ep_close_nbx;
  decltype(&ucp_ep_print_info) ep_print_info;
  decltype(&ucp_tag_send_nbx) tag_send_nbx;
  decltype(&ucp_tag_recv_nbx) tag_recv_nbx;
  decltype(&ucp_tag_recv_request_test) tag_recv_request_test;
  decltype(&ucp_request_check_status) request_check_status;
  decltype(&ucp_request_cancel) request_cancel;
  decltype(&ucp_request_free) request_free;
  decltype(&ucp_mem_map) mem_map;
  decltype(&ucp_mem_unmap) mem_unmap;
  decltype(&ucs_status_string) status_string;

  // "UCX says: Connection reset by remote peer".
  std::string Text(ucs_status_t status) const { return status_string(status); }
};

// What `print` (one of UCX's *_print_info calls) writes to a FILE, as a string.
std::string PrintedText(absl::FunctionRef<void(FILE*)> print);

// The process-wide options UCX reads when it is loaded, each set only when the environment does
// not set it already: UCX_HANDLE_ERRORS=none (no signal handlers of UCX's in the host program),
// UCX_MEM_MALLOC_HOOKS=no, UCX_MEM_MMAP_HOOK_MODE=none and UCX_MEMTYPE_CACHE=n (no memory hooks:
// the transports used on one host need none; see docs/communication.md for RDMA).
void SetUcxDefaults();

// Loads libucp.so.0 once (after SetUcxDefaults) and resolves every function above.
// Errors: kFailedPrecondition with dlopen's or dlsym's words ("install libucx0").
[[nodiscard]] absl::StatusOr<const UcpLibrary*> LoadUcp();

}  // namespace shardkit::ucx_backend

#endif  // SHARDKIT_BACKENDS_UCX_INTERNAL_UCP_LIBRARY_H_
