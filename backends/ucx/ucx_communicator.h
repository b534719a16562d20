// The UCX backend: a Communicator over UCX's UCP tag messages, for CPU memory. Loaded by name as
// the plugin libshardkit_backend_ucx.so (`--backend ucx`, SHARDKIT_BACKEND=ucx).
//
//   ConnectOptions options;  // or ConnectFromEnv() with SHARDKIT_BACKEND=ucx
//   options.backend = "ucx";
//   options.rank = rank;
//   options.world_size = 4;
//   options.store = store;   // shared by all ranks (FileStore, RedisStore, …)
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Connect(options));
//
// Transport: whatever UCX picks for each pair, by UCX_TLS: shared memory (posix, sysv) and
// single-copy CMA between processes of one host, TCP or RDMA (InfiniBand, RoCE) between hosts.
// Each communicator (subgroups too) has a UCP worker of its own on the process's one UCP context
// (internal/ucx_context.h); the worker's address goes to the store under
// "<key_prefix>/ucx/<rank>", and a rank fetches the address of a peer and makes its endpoint only
// when it first exchanges with it. Payloads are tag messages straight from and into caller
// memory, all posted before any wait (large ones by UCX's rendezvous: zero-copy). Waits sleep on
// the worker's event descriptor (UCP_FEATURE_WAKEUP): an idle rank does not spin.
//
// Failure: a peer whose connection breaks, or whose process the keepalive (1 s) finds gone, fails
// the exchanges with it naming it (kUnavailable); a deadline that passes cancels what is pending
// (every endpoint force-closed, the worker destroyed: nothing is written into caller memory
// afterwards) and runs the stall search (core/comm/stall_search.h) to name a stalled rank. A rank
// that fails writes "<key_prefix>/ucx/gave_up" with the rank it blames; ranks waiting on it read
// it within 100 ms and fail naming the same rank. The error's culprit (core/comm/culprit.h) is
// that rank on every rank.
#ifndef SHARDKIT_BACKENDS_UCX_UCX_COMMUNICATOR_H_
#define SHARDKIT_BACKENDS_UCX_UCX_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"

namespace shardkit::ucx_backend {

// The "ucx" factory. Errors: kFailedPrecondition when UCX cannot be loaded or UCX_TLS names a
// transport this host lacks; kInvalidArgument for a world of over 2^20 ranks;
// kDeadlineExceeded naming the ranks that never joined; kInternal with UCX's words.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    const ConnectOptions& options);

// What UCX uses between `comm` (a UCX communicator) and `peer`: ucp_ep_print_info's text, with
// the transport of each lane ("posix/memory", "tcp/lo"), once the two have exchanged.
// Errors: kInvalidArgument for another backend's communicator; kNotFound before any exchange.
[[nodiscard]] absl::StatusOr<std::string> UcxEndpointInfo(const Communicator& comm, int peer);

}  // namespace shardkit::ucx_backend

#endif  // SHARDKIT_BACKENDS_UCX_UCX_COMMUNICATOR_H_
