#include "backends/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/nccl/cuda_util.h"
#include "core/base/deadline.h"
#include "core/base/status_macros.h"
#include "core/comm/backend_registry.h"
#include "core/store/rendezvous.h"

namespace shardkit::nccl_backend {
namespace {

// Host operands are staged at this alignment in the scratch buffer.
constexpr size_t kStagingAlignment = 256;

std::string NcclVersion() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "NCCL (version unknown)";
  return absl::StrCat("NCCL ", code / 10000, ".", code % 10000 / 100, ".", code % 100);
}

// The single place where NCCL results become Status: "<what>: <error> (<last error>; NCCL x.y.z)".
absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, std::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(comm);
  const std::string message =
      absl::StrCat(std::string(what), ": ", ncclGetErrorString(result), " (",
                   last != nullptr && *last != '\0' ? last : "no detail", "; ", NcclVersion(), ")");
  switch (result) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

// Calls poll(finished) until it fails or sets `finished`; kDeadlineExceeded once the deadline
// passes. Pauses as PollBackoff does, so a fast collective costs microseconds and a slow one
// little CPU.
template <typename Fn>
absl::Status PollUntil(absl::Time deadline, Fn&& poll) {
  PollBackoff backoff;
  for (;;) {
    bool finished = false;
    SHARDKIT_RETURN_IF_ERROR(poll(finished));
    if (finished) return absl::OkStatus();
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("deadline passed");
    backoff.Pause();
  }
}

// Waits for a non-blocking communicator's pending operation (init, split, group) to finish.
absl::Status AwaitComm(ncclComm_t comm, absl::Time deadline, std::string_view what) {
  absl::Status status = PollUntil(deadline, [&](bool& finished) {
    ncclResult_t state = ncclInProgress;
    SHARDKIT_RETURN_IF_ERROR(NcclStatus(ncclCommGetAsyncError(comm, &state), comm, what));
    if (state == ncclInProgress) return absl::OkStatus();
    finished = true;
    return NcclStatus(state, comm, what);
  });
  if (absl::IsDeadlineExceeded(status)) {
    return absl::DeadlineExceededError(
        absl::StrCat(std::string(what), ": not done by the deadline"));
  }
  return status;
}

// Finishes a non-blocking NCCL call that returned `started`: waits if it is in progress.
absl::Status Settle(ncclResult_t started, ncclComm_t comm, absl::Time deadline,
                    std::string_view what) {
  if (started != ncclSuccess && started != ncclInProgress) return NcclStatus(started, comm, what);
  return AwaitComm(comm, deadline, what);
}

// Joins (or creates) a non-blocking communicator; aborts it if it does not come up in time.
absl::StatusOr<ncclComm_t> InitComm(int world_size, const ncclUniqueId& id, int rank,
                                    absl::Time deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const std::string what = absl::StrCat("ncclCommInitRankConfig(rank ", rank, "/", world_size, ")");
  // Two statements: `comm` must be read after the call has set it (as one call's arguments, their
  // order of evaluation is unspecified, and GCC passed the null pointer).
  const ncclResult_t started = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
  absl::Status status = Settle(started, comm, deadline, what);
  if (!status.ok()) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return status;
  }
  return comm;
}

// The unique id of a new communicator: rank 0 creates it and publishes it in the store.
absl::StatusOr<ncclUniqueId> ShareUniqueId(const ConnectOptions& options, absl::Time deadline) {
  ncclUniqueId id;
  const std::string key = options.key_prefix + "/nccl/unique_id";
  if (options.rank == 0) {
    SHARDKIT_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId"));
    if (options.world_size > 1) {
      SHARDKIT_RETURN_IF_ERROR(options.store->Set(
          key, std::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
    }
    return id;
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::string value, options.store->Get(key, deadline - absl::Now()));
  if (value.size() != sizeof(id)) {
    return absl::InternalError(absl::StrCat("NCCL unique id under \"", key, "\" has ", value.size(),
                                            " bytes, expected ", sizeof(id)));
  }
  std::memcpy(&id, value.data(), sizeof(id));
  return id;
}

std::string PeerList(std::span<const int> peers) {
  return peers.empty() ? "no peers" : absl::StrCat("peers ", absl::StrJoin(peers, ", "));
}

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`; creates this communicator's stream on `device`.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(CommunicatorOptions options,
                                                              int device, ncclComm_t comm);
  ~NcclCommunicator() override;

  bool SupportsDevice(const Device& device) const override {
    return device.is_cuda() && (device.index() < 0 || device.index() == device_);
  }

 protected:
  absl::Status Exchange(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs, absl::Time deadline) override;
  absl::StatusOr<std::unique_ptr<Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                               int new_rank, uint64_t split_id,
                                                               absl::Time deadline) override;

 private:
  NcclCommunicator(CommunicatorOptions options, int device, ncclComm_t comm, cudaStream_t stream)
      : Communicator(std::move(options)), device_(device), comm_(comm), stream_(stream) {}

  // Device memory for `nbytes` of staged host operands (grows, never shrinks).
  absl::StatusOr<std::byte*> Scratch(size_t nbytes);
  // Waits until the stream has run everything queued, watching NCCL's asynchronous error.
  absl::Status AwaitStream(absl::Time deadline);
  // Aborts the NCCL communicator (after a timeout or an asynchronous error): pending kernels
  // stop, peers blocked on this rank fail instead of waiting out their deadline.
  void Abort();

  const int device_;
  ncclComm_t comm_;  // null once aborted
  cudaStream_t stream_;
  void* scratch_ = nullptr;
  size_t scratch_size_ = 0;
};

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Create(CommunicatorOptions options,
                                                                       int device,
                                                                       ncclComm_t comm) {
  cudaStream_t stream = nullptr;
  absl::Status status = CudaStatus(cudaStreamCreate(&stream), "cudaStreamCreate");
  if (!status.ok()) {
    (void)ncclCommAbort(comm);
    return status;
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(options), device, comm, stream));
}

NcclCommunicator::~NcclCommunicator() {
  absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
  if (comm_ != nullptr) {
    // Finalize flushes outstanding work; bounded by the default timeout, then abort instead.
    const absl::Status finalized =
        Settle(ncclCommFinalize(comm_), comm_, absl::Now() + default_timeout(), "ncclCommFinalize");
    if (finalized.ok()) {
      (void)ncclCommDestroy(comm_);
    } else {
      (void)ncclCommAbort(comm_);
    }
  }
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void NcclCommunicator::Abort() {
  if (comm_ == nullptr) return;
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

absl::StatusOr<std::byte*> NcclCommunicator::Scratch(size_t nbytes) {
  if (nbytes > scratch_size_) {
    if (scratch_ != nullptr) (void)cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_size_ = 0;
    SHARDKIT_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&scratch_, nbytes),
                                        absl::StrCat("cudaMalloc(", nbytes, " bytes of staging)")));
    scratch_size_ = nbytes;
  }
  return static_cast<std::byte*>(scratch_);
}

absl::Status NcclCommunicator::AwaitStream(absl::Time deadline) {
  return PollUntil(deadline, [&](bool& finished) -> absl::Status {
    const cudaError_t query = cudaStreamQuery(stream_);
    if (query == cudaSuccess) {
      finished = true;
      return absl::OkStatus();
    }
    if (query != cudaErrorNotReady) return CudaStatus(query, "cudaStreamQuery");
    ncclResult_t state = ncclSuccess;
    SHARDKIT_RETURN_IF_ERROR(
        NcclStatus(ncclCommGetAsyncError(comm_, &state), comm_, "ncclCommGetAsyncError"));
    if (state == ncclInProgress) return absl::OkStatus();
    return NcclStatus(state, comm_, "asynchronous NCCL error");
  });
}

absl::Status NcclCommunicator::Exchange(uint64_t /*tag*/, uint64_t /*seq*/,
                                        std::span<const SendOp> sends,
                                        std::span<const RecvOp> recvs, absl::Time deadline) {
  // NCCL matches sends and receives per pair of ranks in issue order; ranks issue the core's
  // phases in the same order, so the core's tags are not needed.
  if (sends.empty() && recvs.empty()) return absl::OkStatus();
  if (comm_ == nullptr) return absl::FailedPreconditionError("NCCL communicator was aborted");
  std::vector<int> peers;
  for (const SendOp& s : sends) peers.push_back(s.peer);
  for (const RecvOp& r : recvs) peers.push_back(r.peer);
  SHARDKIT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));

  // Offsets of host operands in the staging buffer (sends first, then receives).
  std::vector<size_t> offsets;
  size_t staged = 0;
  auto stage = [&](const Device& device, size_t size) {
    offsets.push_back(staged);
    if (device.is_cpu())
      staged += (size + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
  };
  for (const SendOp& s : sends) stage(s.device, s.size);
  for (const RecvOp& r : recvs) stage(r.device, r.size);
  std::byte* scratch = nullptr;
  if (staged > 0) {
    SHARDKIT_ASSIGN_OR_RETURN(scratch, Scratch(staged));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    if (!sends[i].device.is_cpu()) continue;
    SHARDKIT_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(scratch + offsets[i], sends[i].data, sends[i].size,
                                   cudaMemcpyHostToDevice, stream_),
                   "staging a host send"));
  }

  absl::Status status = NcclStatus(ncclGroupStart(), comm_, "ncclGroupStart");
  for (size_t i = 0; i < sends.size() && status.ok(); ++i) {
    const SendOp& s = sends[i];
    const void* data = s.device.is_cpu() ? scratch + offsets[i] : s.data;
    status = NcclStatus(ncclSend(data, s.size, ncclUint8, s.peer, comm_, stream_), comm_,
                        absl::StrCat("ncclSend(", s.size, " bytes to peer ", s.peer, ")"));
  }
  for (size_t i = 0; i < recvs.size() && status.ok(); ++i) {
    const RecvOp& r = recvs[i];
    void* data = r.device.is_cpu() ? scratch + offsets[sends.size() + i] : r.data;
    status = NcclStatus(ncclRecv(data, r.size, ncclUint8, r.peer, comm_, stream_), comm_,
                        absl::StrCat("ncclRecv(", r.size, " bytes from peer ", r.peer, ")"));
  }
  const ncclResult_t ended = ncclGroupEnd();  // always close the group, even after an error
  if (status.ok()) status = Settle(ended, comm_, deadline, "ncclGroupEnd");
  if (status.ok()) status = AwaitStream(deadline);
  if (!status.ok()) {
    Abort();
    const std::string what = absl::StrCat("NCCL send/receive with ", PeerList(peers));
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": not complete by the deadline; communicator aborted (a peer may have died)"));
    }
    return Annotate(status, what);
  }
  // The stream is idle: copying staged receives out cannot block on a peer.
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (!recvs[i].device.is_cpu()) continue;
    SHARDKIT_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(recvs[i].data, scratch + offsets[sends.size() + i], recvs[i].size,
                              cudaMemcpyDeviceToHost),
                   "unstaging a host receive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::CreateSubgroup(
    const std::vector<int>& members, int new_rank, uint64_t split_id, absl::Time deadline) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("NCCL communicator was aborted");
  SHARDKIT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = nullptr;
  const std::string what = absl::StrCat("ncclCommSplit(split ", split_id, ")");
  const bool member = new_rank >= 0;
  const ncclResult_t started =
      ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, member ? new_rank : 0, &child, &config);
  // Members wait for their new communicator; non-members (no child) for the parent's part.
  absl::Status status = Settle(started, child != nullptr ? child : comm_, deadline, what);
  // NCCL (2.23 on) may fill in `child` only once the parent's part is done: then wait for the
  // child's own initialisation too (immediate when it is already done).
  if (status.ok() && member) {
    status = child == nullptr
                 ? absl::InternalError(absl::StrCat(what, ": NCCL returned no communicator"))
                 : AwaitComm(child, deadline, what);
  }
  if (!status.ok()) {
    if (child != nullptr) (void)ncclCommAbort(child);
    return status;
  }
  if (!member) return std::unique_ptr<Communicator>();
  CommunicatorOptions options{new_rank, static_cast<int>(members.size()), backend(),
                              default_timeout()};
  return Create(std::move(options), device_, child);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const ConnectOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  const std::string who = absl::StrCat("NCCL backend (rank ", options.rank, "/", options.world_size,
                                       ", local rank ", options.local_rank, ")");
  absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok()) return Annotate(devices.status(), who);
  if (options.local_rank < 0 || options.local_rank >= *devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": no CUDA device cuda:", options.local_rank, " (this machine has ", *devices,
        "); NCCL runs one rank per device: set SHARDKIT_LOCAL_RANK below the device count"));
  }
  absl::Status status = CudaStatus(cudaSetDevice(options.local_rank),
                                   absl::StrCat("cudaSetDevice(", options.local_rank, ")"));
  if (!status.ok()) return Annotate(status, who);
  if (!options.ifname.empty()) setenv("NCCL_SOCKET_IFNAME", options.ifname.c_str(), 0);
  if (options.world_size > 1) {
    status = AwaitMembers(*options.store, options.key_prefix, options.rank, options.world_size,
                          deadline);
    if (!status.ok()) return Annotate(status, who);
  }
  absl::StatusOr<ncclUniqueId> id = ShareUniqueId(options, deadline);
  if (!id.ok()) return Annotate(id.status(), who);
  absl::StatusOr<ncclComm_t> comm = InitComm(options.world_size, *id, options.rank, deadline);
  if (!comm.ok()) return Annotate(comm.status(), who);
  CommunicatorOptions comm_options{options.rank, options.world_size, "nccl", options.timeout};
  return NcclCommunicator::Create(std::move(comm_options), options.local_rank, *comm);
}

SHARDKIT_REGISTER_BACKEND("nccl", &CreateNcclCommunicator);

}  // namespace shardkit::nccl_backend
