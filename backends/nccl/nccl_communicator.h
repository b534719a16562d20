// The NCCL backend: a Communicator over NCCL for CUDA device memory. Registered as "nccl" by this
// alwayslink library (linked into //backends:all only under --config=cuda).
//
//   ConnectOptions options;            // or ConnectFromEnv() with SHARDKIT_BACKEND=nccl
//   options.backend = "nccl";
//   options.rank = rank;
//   options.local_rank = local_rank;   // SHARDKIT_LOCAL_RANK: this rank uses cuda:<local_rank>
//   options.world_size = 4;
//   options.store = store;
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Connect(options));
//   // Buffers passed to comm must be MutableBuffer(ptr, n, Device::Cuda()) on that device.
//
// Bootstrap: each rank announces itself under "<key_prefix>/joined/<rank>" (a missing rank is
// named on timeout), rank 0 publishes ncclGetUniqueId() under "<key_prefix>/nccl/unique_id", and
// every rank joins with ncclCommInitRankConfig. options.ifname, if set, becomes
// NCCL_SOCKET_IFNAME (unless the environment already sets it).
//
// Deadlines: communicators are non-blocking (ncclConfig_t::blocking = 0). Every wait — init,
// split, a grouped send/receive — polls ncclCommGetAsyncError and the stream; at the deadline the
// communicator is aborted (ncclCommAbort) and the call fails with kDeadlineExceeded naming the
// peers; an asynchronous NCCL error (e.g. a peer that died) aborts it as well, with kUnavailable
// for remote/system errors. Never a hang. Every NCCL error carries ncclGetLastError()'s text and
// the NCCL version.
//
// Payloads: the core's point-to-point phases become one grouped ncclSend/ncclRecv per call on
// this communicator's stream, straight from and into device memory. Host-memory operands (the
// agreement headers and AllGather's host results) are staged through a device scratch buffer
// owned by the communicator: copied in before the group, out after the stream completed.
// Split uses ncclCommSplit (every rank of the parent takes part; non-members pass
// NCCL_SPLIT_NOCOLOR). Devices: tensors must be CUDA memory on this rank's device
// (SupportsDevice); host buffers passed to a collective are staged like the headers (the
// engine's digests), fine for control data, slow for tensors.
#ifndef SHARDKIT_BACKENDS_NCCL_NCCL_COMMUNICATOR_H_
#define SHARDKIT_BACKENDS_NCCL_NCCL_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"

namespace shardkit::nccl_backend {

// The "nccl" factory. Errors: kFailedPrecondition "no CUDA device" when the machine has no usable
// CUDA device, or fewer devices than SHARDKIT_LOCAL_RANK needs; kDeadlineExceeded naming ranks
// that never joined or an NCCL init that did not finish in time; kUnavailable / kInternal for
// NCCL errors (with ncclGetLastError text and the NCCL version).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const ConnectOptions& options);

}  // namespace shardkit::nccl_backend

#endif  // SHARDKIT_BACKENDS_NCCL_NCCL_COMMUNICATOR_H_
