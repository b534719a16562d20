// Communicator: the backend-agnostic collective interface the sharding engine talks to.
//
// A Communicator connects `world_size` ranks (one per process, or per thread in tests). Backends
// (Gloo for CPU memory, NCCL for CUDA memory) derive from it, register a factory by name
// (backend_registry.h) and are created through Connect (connect.h); core never includes a backend
// header.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, ConnectFromEnv());
//   std::vector<uint8_t> data(1024);
//   SHARDKIT_RETURN_IF_ERROR(comm->Broadcast(MutableBuffer(data), /*root=*/0));
//   std::vector<ConstBuffer> chunks = ...;  // root only: one chunk per rank, sizes may differ
//   SHARDKIT_RETURN_IF_ERROR(comm->Scatter(chunks, MutableBuffer(my_chunk), /*root=*/0));
//
// Semantics common to every operation (docs/communication.md has the details):
// - Synchronous. A call returns when this rank's part is complete: its receive buffers hold the
//   data and its send buffers may be reused. It says nothing about other ranks' completion
//   (a Broadcast may return OK on the root before a slow receiver has its bytes).
// - Same order on every rank. Every rank of the group calls the same operations in the same order.
//   Each call gets the next sequence number (1, 2, …), used to derive the backend's message tags.
// - Agreement before data. Before any payload byte moves, all ranks exchange a small fixed-size
//   header (op, sequence number, root, sizes, local argument errors). A mismatch — different ops,
//   roots, or byte counts that do not match between sender and receiver — makes every rank return
//   the same kInvalidArgument; nothing moves and the communicator stays usable.
// - Deadlines. Every call has one (CallOptions::timeout, default CommunicatorOptions::timeout,
//   i.e. SHARDKIT_TIMEOUT). Errors name op, backend, rank/size, seq and the peer when known:
//   `Broadcast (backend=gloo, rank=3/8, seq=17): peer 5: Connection closed by peer`.
// - Failure is final. After a transport error or a timeout the communicator refuses every further
//   call with kFailedPrecondition ("must be recreated"). Argument errors do not poison it.
// - Byte counters count payload bytes moved to/from other ranks; control (header) bytes are
//   counted separately; copies a rank makes to itself are not counted.
// Thread-safety: calls on one communicator are serialized by an internal mutex, but the ranks'
// call order must still match, so use one thread per communicator. counters() may be read from any
// thread.
#ifndef SHARDKIT_CORE_COMM_COMMUNICATOR_H_
#define SHARDKIT_CORE_COMM_COMMUNICATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/env.h"
#include "core/tensor/device.h"

namespace shardkit {
class Communicator;
class PreparedTransfer;
struct CallOptions;
struct RoundShape;
struct ConstBuffer;
struct MutableBuffer;

namespace internal {
struct AgreementVerdict;
struct LocalProblem;
enum class Phase : int;

// The floor for benchmarks (`shardkit bench --strategy raw`): rank self sends sends[p] to and
// receives recvs[p] from each peer p (one buffer per rank, empty ones skipped, [self] ignored)
// straight through the backend — no agreement header, no sequence number, no byte counters. The
// caller guarantees that both sides of every pair pass the same size; a mismatch is undefined
// (Gloo aborts the process). Errors: as the backend's transport (the communicator is poisoned).
[[nodiscard]] absl::Status RawExchange(Communicator& comm, std::span<const ConstBuffer> sends,
                                       std::span<const MutableBuffer> recvs,
                                       const CallOptions& options);

}  // namespace internal

// A read-only byte range in caller memory and the device holding it. Not owning.
// One run of a gathered send (ConstBuffer::runs): `size` bytes of host memory at `data`.
struct HostRun {
  const void* data = nullptr;
  size_t size = 0;
};

struct ConstBuffer {
  ConstBuffer() = default;
  ConstBuffer(const void* data, size_t size, Device device = Device::Cpu())
      : data(data), size(size), device(device) {}
  template <typename T>
  explicit ConstBuffer(const std::vector<T>& v) : ConstBuffer(v.data(), v.size() * sizeof(T)) {}
  explicit ConstBuffer(std::string_view s) : ConstBuffer(s.data(), s.size()) {}

  const void* data = nullptr;
  size_t size = 0;
  Device device;
  // A gathered buffer (segment sends to other ranks, on a backend whose segment path gathers:
  // PreparedTransfer::Gathers): its bytes are those of `runs` back to back, `size` their total,
  // `data` the first run's. The runs must outlive the call, so that a strided range need not be
  // packed.
  std::span<const HostRun> runs;
};

// A writable byte range in caller memory and the device holding it. Not owning.
struct MutableBuffer {
  MutableBuffer() = default;
  MutableBuffer(void* data, size_t size, Device device = Device::Cpu())
      : data(data), size(size), device(device) {}
  template <typename T>
  explicit MutableBuffer(std::vector<T>& v) : MutableBuffer(v.data(), v.size() * sizeof(T)) {}

  operator ConstBuffer() const { return ConstBuffer(data, size, device); }  // NOLINT

  void* data = nullptr;
  size_t size = 0;
  Device device;
};

enum class CollectiveOp : uint8_t {
  kBroadcast = 1,
  kScatter,
  kGather,
  kAllGather,
  kAllToAll,
  kBarrier,
  kSplit,
  // AllToAllSegments and PreparedTransfer (prepared_transfer.h: its preparation, rounds and
  // closing): a kind of its own, since its header carries the caller's check value and round
  // count where AllToAll carries neither. ScatterSegments is a Scatter (Scatter is
  // ScatterSegments of one segment per rank) and counts as kScatter.
  kAllToAllSegments,
};
inline constexpr int kNumCollectiveOps = 8;

// "Broadcast", "Scatter", …
const char* CollectiveOpName(CollectiveOp op);

// Per-call options.
struct CallOptions {
  // Deadline of this call, measured from its start; InfiniteDuration() means "the communicator's
  // default" (CommunicatorOptions::timeout).
  absl::Duration timeout = absl::InfiniteDuration();
  // An absolute deadline shared by the several calls of one operation (ShardParameter's
  // agreement, transfers and commit); when set, it replaces `timeout`.
  absl::Time deadline = absl::InfiniteFuture();
};

// What every communicator knows about itself. Backends fill it in at construction.
struct CommunicatorOptions {
  int rank = 0;
  int world_size = 1;
  std::string backend;                            // "gloo", "nccl", …
  absl::Duration timeout = env::kDefaultTimeout;  // default per-call deadline
};

// Bytes moved by one kind of operation since the communicator was created (or last reset).
struct OpCounters {
  int64_t calls = 0;                   // completed successfully
  int64_t bytes_sent = 0;              // payload to other ranks
  int64_t bytes_received = 0;          // payload from other ranks
  int64_t control_bytes_sent = 0;      // agreement headers
  int64_t control_bytes_received = 0;  // agreement headers
};

class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const std::string& backend() const { return options_.backend; }
  absl::Duration default_timeout() const { return options_.timeout; }
  // The absolute deadline of a call started now with `options`: options.deadline if set, else now
  // + options.timeout (or the default). An operation made of several calls resolves it once and
  // passes it to each: `CallOptions step{.deadline = comm.Deadline(options)};`.
  absl::Time Deadline(const CallOptions& options) const;

  // Copies `buffer` of rank `root` into `buffer` of every rank. Every rank passes the same size.
  // Errors: kInvalidArgument (every rank) if roots, sizes or ops differ or root is out of range;
  // kDeadlineExceeded / kUnavailable on timeout / transport error; kFailedPrecondition if poisoned.
  [[nodiscard]] absl::Status Broadcast(MutableBuffer buffer, int root,
                                       const CallOptions& options = {});

  // Scatterv: rank r receives root's sends[r] into `recv`. Only the root passes `sends` (one
  // buffer per rank, sizes may differ and may be 0; sends[root] may alias `recv`); other ranks
  // pass an empty span. recv.size must equal root's sends[rank].size.
  // Errors: as Broadcast; kInvalidArgument names the sender, receiver and both sizes on mismatch.
  [[nodiscard]] absl::Status Scatter(std::span<const ConstBuffer> sends, MutableBuffer recv,
                                     int root, const CallOptions& options = {});

  // Scatter of several segments per rank in one call (one agreement, one payload round): rank r
  // receives root's sends[r][0], sends[r][1], … into its recvs[0], recvs[1], … in order. Sender
  // and receiver must cut the transfer into the same non-empty segments (the agreement checks the
  // total and the segment sizes of every pair); zero-size segments are skipped on both sides. The
  // root's own segments sends[root] are copied into its `recvs` (same total size).
  // Errors: as Scatter.
  [[nodiscard]] absl::Status ScatterSegments(std::span<const std::vector<ConstBuffer>> sends,
                                             std::span<const MutableBuffer> recvs, int root,
                                             const CallOptions& options = {});

  // Gatherv: the root receives every rank's `send` into recvs[rank]. Only the root passes `recvs`
  // (one per rank, sizes must equal the senders' sizes); others pass an empty span.
  // Errors: as Scatter.
  [[nodiscard]] absl::Status Gather(ConstBuffer send, std::span<const MutableBuffer> recvs,
                                    int root, const CallOptions& options = {});

  // Every rank receives every rank's bytes (lengths may differ); result[r] is rank r's input.
  // Errors: as Broadcast (no size agreement is needed: lengths travel in the header).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> AllGather(ConstBuffer send,
                                                                   const CallOptions& options = {});

  // Rank i sends sends[j] to rank j, which receives it into its recvs[i]. Both spans have one
  // buffer per rank; sends[j].size on rank i must equal recvs[i].size on rank j.
  // Errors: as Scatter.
  [[nodiscard]] absl::Status AllToAll(std::span<const ConstBuffer> sends,
                                      std::span<const MutableBuffer> recvs,
                                      const CallOptions& options = {});

  // AllToAll of several segments per pair in one call (one agreement, one payload round): rank i
  // sends sends[j][0], sends[j][1], … to rank j, which receives them into its recvs[i][0], … in
  // order. Both sides of a pair cut the bytes into the same segments (the agreement checks the
  // total and the segment sizes of every pair); zero-size segments are skipped on both sides; a
  // rank's own sends[self] are copied in order into its recvs[self] (same total). `check` must be
  // the same on every rank: a digest of whatever the callers agreed on earlier, compared in the
  // header the call exchanges anyway, at no extra round. It is a PreparedTransfer of one round
  // (prepared_transfer.h), which repeats a transfer without agreeing again.
  // Errors: as Scatter; kInvalidArgument (every rank) naming two ranks whose `check` differs.
  //
  // With `arrived`, arrived(peer, index) runs on the caller's thread once recvs[peer][index] holds
  // its bytes, while later segments may still be on the wire, each peer's segments in order; a
  // backend that cannot tell (the default) calls it for every segment once all have arrived. An
  // error it returns fails the call, and the communicator is poisoned (the transfer was under
  // way).
  using SegmentArrived = absl::FunctionRef<absl::Status(int peer, size_t index)>;
  [[nodiscard]] absl::Status AllToAllSegments(std::span<const std::vector<ConstBuffer>> sends,
                                              std::span<const std::vector<MutableBuffer>> recvs,
                                              uint64_t check, const CallOptions& options = {},
                                              const SegmentArrived* arrived = nullptr);

  // Returns once every rank has entered the barrier. Errors: as Broadcast.
  [[nodiscard]] absl::Status Barrier(const CallOptions& options = {});

  // Collective over this communicator: every rank passes the same `ranks` (distinct, in range, not
  // empty). Members get a new communicator in which ranks[i] has rank i; others get nullptr.
  // The new communicator has its own sequence numbers and counters.
  // Errors: kInvalidArgument (every rank) if the lists differ or are invalid; errors of the
  // backend's rendezvous (kDeadlineExceeded naming members that never joined).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Split(
      std::span<const int> ranks, const CallOptions& options = {});

  // Snapshot of the counters of one kind of operation, or of all of them summed.
  OpCounters counters(CollectiveOp op) const;
  OpCounters total_counters() const;
  void ResetCounters();

  // The error that poisoned this communicator, or OK.
  absl::Status poisoned() const;

  // Abandons this communicator, from any thread (a signal's watcher: the Python package calls it
  // on Ctrl-C). A call in flight on a backend that is Interruptible() fails at once with
  // kCancelled, as its next wait would; with none in flight the communicator fails here. Either
  // way it is poisoned (every later call fails with kFailedPrecondition) and the backend tells its
  // peers, so that ranks waiting on this one fail at once too, naming it as interrupted. On a
  // backend that is not Interruptible(), a call in flight runs to its end (or deadline) first.
  // May be called more than once.
  void Abort();
  // Whether Abort wakes a call blocked in this backend (Gloo's does; the default does not).
  virtual bool Interruptible() const { return false; }

  // Whether this backend moves tensors placed on `device` (Gloo: host memory only; NCCL: CUDA
  // memory only): what placements and source tensors may name. Host-memory buffers are accepted
  // by every backend's collectives regardless (the core's own control data is host memory; a
  // device backend stages it), which is how the engine exchanges digests and verdicts over NCCL;
  // they are meant for small control data, not tensors.
  virtual bool SupportsDevice(const Device& device) const = 0;

  // Where this rank's tensors live when nothing names a device: the CPU when this backend moves
  // host memory, else the rank's current CUDA device (`cuda`: NCCL binds each rank to one).
  Device DefaultDevice() const {
    return SupportsDevice(Device::Cpu()) ? Device::Cpu() : Device::Cuda();
  }

 protected:
  // `gathers_sends`: whether ExchangeSegments takes gathered sends (SendOp::runs), writing the
  // runs itself (Gloo: sendmsg on its own connections); PreparedTransfer::Gathers reads it.
  explicit Communicator(CommunicatorOptions options, bool gathers_sends = false);

  // One point-to-point payload. Sizes are never zero (zero-byte transfers are skipped on both
  // sides before the backend sees them). `device` is where `data` lives: control data (agreement
  // headers) and AllGather's results are always host memory, payloads live on the caller's
  // device, so a device-memory backend (NCCL) stages the host ones itself.
  struct SendOp {
    int peer;
    const void* data;
    size_t size;
    Device device = Device::Cpu();
    std::span<const HostRun> runs = {};  // gathered (ConstBuffer::runs): ExchangeSegments only
  };
  struct RecvOp {
    int peer;
    void* data;
    size_t size;
    Device device = Device::Cpu();
  };

  // Backend hook: starts every send and receive (overlapping them), then waits for all of them
  // until `deadline`. `tag` is unique per (call, phase) and opaque to backends; messages between
  // one pair of ranks with the same tag are matched in order. `seq` is the sequence number of
  // the call this exchange belongs to (increasing; what a backend reports a failed call by).
  // Sizes have been agreed by both sides. Never throws.
  // Errors: kDeadlineExceeded, kUnavailable (naming the peer when known), kInternal.
  [[nodiscard]] virtual absl::Status Exchange(uint64_t tag, uint64_t seq,
                                              std::span<const SendOp> sends,
                                              std::span<const RecvOp> recvs,
                                              absl::Time deadline) = 0;

  // Backend hook for the segment calls' payload: every round of a PreparedTransfer (and so of
  // AllToAllSegments), and only those come here. Exchange, calling arrived(i) on the caller's
  // thread once receive i (its index in `recvs`) has completed, before the call returns, in the
  // order of `recvs` (an error from it fails the exchange). Sends may be gathered (SendOp::runs)
  // where the backend said so at construction (`gathers_sends`). The default calls Exchange, then
  // `arrived` for every receive; a backend with a path of its own for segments (Gloo: its payload
  // mesh, which gathers; UCX: receives reported one by one) overrides it.
  [[nodiscard]] virtual absl::Status ExchangeSegments(
      uint64_t tag, uint64_t seq, std::span<const SendOp> sends, std::span<const RecvOp> recvs,
      absl::Time deadline, absl::FunctionRef<absl::Status(size_t)> arrived);

  // Backend hook for the agreement's control messages: one small host-memory message per peer
  // and phase (headers, verdicts) of call `seq`, same contract as Exchange. The default is
  // Exchange; a backend with a cheaper path for small messages (Gloo: SocketMesh) overrides it.
  [[nodiscard]] virtual absl::Status ExchangeControl(uint64_t tag, uint64_t seq,
                                                     std::span<const SendOp> sends,
                                                     std::span<const RecvOp> recvs,
                                                     absl::Time deadline) {
    return Exchange(tag, seq, sends, recvs, deadline);
  }

  // Backend hook of Abort; any thread, never throws. With `idle` false a call may be in flight on
  // another thread: make its waits, and every later one, fail at once with kCancelled (the call's
  // failure path then closes the connections, telling the peers why). With `idle` true no call is
  // in flight (the caller holds the call lock): close the connections now, telling the peers.
  virtual void Interrupt(bool /*idle*/) noexcept {}

  // Backend hook for Split, called on every rank of this group (backends such as NCCL split
  // collectively): the caller is member `new_rank` of `members` (ranks of this group), or not a
  // member when new_rank is -1 (then it returns nullptr once its part is done). `split_id` is
  // unique within this communicator and identical on all ranks.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Communicator>> CreateSubgroup(
      const std::vector<int>& members, int new_rank, uint64_t split_id, absl::Time deadline) = 0;

 private:
  friend class PreparedTransfer;
  friend absl::Status internal::RawExchange(Communicator&, std::span<const ConstBuffer>,
                                            std::span<const MutableBuffer>, const CallOptions&);
  struct Call;

  // Starts a call: takes the call lock, allocates the sequence number, computes the deadline.
  Call Begin(CollectiveOp op, const CallOptions& options);
  // Starts a round of a prepared transfer (prepared_transfer.h): the call lock, the transfer's
  // deadline, no sequence number of its own (the round's payload tag comes from raw_seq_) and
  // no agreement (its preparation was agreed).
  Call Resume(const PreparedTransfer& transfer);
  // Runs one collective: refusal if poisoned, agreement (unless the call is a prepared round),
  // then `transfer` (only if agreement passed), with poisoning, counters and error annotation in
  // one place.
  absl::Status Run(Call& call, absl::FunctionRef<absl::Status()> transfer);
  absl::Status Agree(Call& call);
  // All-gathers over ExchangeControl up and down a binomial tree (see call_agreement.h):
  // `all` holds sizes[r] bytes of every rank r in rank order, this rank's filled in; on return
  // every rank's are. Every rank passes the same `sizes`. With `verdict` (round 1: `all` holds
  // the ControlHeaders), rank 0 judges the headers once they are all up and sends its verdict
  // down first, to every rank's `verdict`; the rest of `all` goes down only if it is not kAgreed.
  absl::Status GatherControl(Call& call, internal::Phase phase, std::span<std::byte> all,
                             std::span<const size_t> sizes,
                             internal::AgreementVerdict* verdict = nullptr);
  // Moves one phase of a call through its path: ExchangeControl (agreement), Exchange (payload)
  // or, with `arrived`, ExchangeSegments (a segment round's payload); counts its bytes.
  absl::Status Move(Call& call, internal::Phase phase, std::span<const SendOp> sends,
                    std::span<const RecvOp> recvs);
  absl::Status MoveSegments(Call& call, std::span<const SendOp> sends,
                            std::span<const RecvOp> recvs,
                            absl::FunctionRef<absl::Status(size_t)> arrived);
  // Annotates a failed Move (and marks the call's transport failed), or counts a good one.
  absl::Status Moved(Call& call, internal::Phase phase, absl::Status status,
                     std::span<const SendOp> sends, std::span<const RecvOp> recvs);
  // Adds to the counters of the call's op: payload or control bytes.
  void Count(const Call& call, bool payload, int64_t sent, int64_t received);
  // Declares `rounds` of segments (prepared_transfer.h) and `check` for the agreement of `call`,
  // with the argument error `problem` found in the caller's buffers.
  void DeclareSegments(Call& call, std::span<const RoundShape> rounds, uint64_t check,
                       internal::LocalProblem problem);
  // One round of segments (AllToAllSegments' payload, a prepared round): copies to itself, then
  // the other pairs' segments through MoveSegments, reporting as AllToAllSegments says.
  absl::Status TransferSegments(Call& call, std::span<const std::vector<ConstBuffer>> sends,
                                std::span<const std::vector<MutableBuffer>> recvs,
                                const SegmentArrived* arrived);
  std::string Context(const Call& call) const;
  // The first argument error of one buffer / of a per-rank buffer list (index = position).
  internal::LocalProblem CheckBuffer(const ConstBuffer& buffer, int index) const;
  internal::LocalProblem CheckBuffers(std::span<const ConstBuffer> buffers) const;
  // CheckBuffer for a segment send to `peer`, which may be gathered.
  internal::LocalProblem CheckSegment(const ConstBuffer& segment, int peer) const;
  // The first argument error of one round's segments, sends and receives.
  internal::LocalProblem CheckSegments(std::span<const std::vector<ConstBuffer>> sends,
                                       std::span<const std::vector<MutableBuffer>> recvs) const;

  const CommunicatorOptions options_;
  const bool gathers_sends_;
  std::mutex call_mu_;    // one call at a time
  uint64_t seq_ = 0;      // guarded by call_mu_
  uint64_t raw_seq_ = 0;  // guarded by call_mu_; the tags of RawExchange and prepared rounds
  mutable std::mutex state_mu_;
  absl::Status poisoned_;                                   // guarded by state_mu_
  std::array<OpCounters, kNumCollectiveOps + 1> counters_;  // guarded by state_mu_; [op]
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_COMMUNICATOR_H_
