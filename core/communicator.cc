#include "core/communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/allocator.h"
#include "core/internal/agreement.h"
#include "core/status_macros.h"

namespace shardkit {
namespace {

using internal::LocalError;
using internal::LocalProblem;

// Tag phases. Control phases use fixed tags (matched in order per pair), so that ranks whose
// sequence numbers diverged still exchange headers and report the divergence instead of hanging.
constexpr int kPhaseHeader = 0;
constexpr int kPhaseVerdict = 1;
constexpr int kPhasePayload = 2;
constexpr int kPhaseRaw = 3;  // RawExchange: its own sequence, never matched against collectives

uint64_t Tag(uint64_t seq, int phase) {
  return phase >= kPhasePayload ? (seq << 2) | phase : static_cast<uint64_t>(phase);
}

// Keeps the first problem found.
void Note(LocalProblem& problem, LocalProblem candidate) {
  if (problem.error == LocalError::kNone) problem = candidate;
}

LocalProblem CheckRoot(int root, int world_size) {
  if (root >= 0 && root < world_size) return {};
  return {LocalError::kRootOutOfRange, root, world_size};
}

LocalProblem CheckCount(size_t count, int world_size) {
  if (count == static_cast<size_t>(world_size)) return {};
  return {LocalError::kBufferCount, static_cast<int64_t>(count), world_size};
}

LocalProblem CheckSelfSize(size_t sent, size_t received) {
  if (sent == received) return {};
  return {LocalError::kSelfSize, static_cast<int64_t>(sent), static_cast<int64_t>(received)};
}

// A rank's copy to itself (its own chunk of a Scatter/Gather/AllToAll/AllGather), on whatever
// devices the two buffers live.
absl::Status CopyToSelf(ConstBuffer from, void* to, const Device& to_device, size_t size) {
  if (size == 0 || (from.data == to && from.device == to_device)) return absl::OkStatus();
  return CopyBytes(to, to_device, from.data, from.device, size);
}

// The root's own part of a segmented Scatter: `from` copied in order into `to` (same total size,
// possibly cut differently).
absl::Status CopySegmentsToSelf(std::span<const ConstBuffer> from,
                                std::span<const MutableBuffer> to) {
  size_t i = 0, j = 0, from_at = 0, to_at = 0;
  while (i < from.size() && j < to.size()) {
    const size_t n = std::min(from[i].size - from_at, to[j].size - to_at);
    ConstBuffer piece(static_cast<const std::byte*>(from[i].data) + from_at, n, from[i].device);
    SHARDKIT_RETURN_IF_ERROR(
        CopyToSelf(piece, static_cast<std::byte*>(to[j].data) + to_at, to[j].device, n));
    from_at += n;
    to_at += n;
    if (from_at == from[i].size) ++i, from_at = 0;
    if (to_at == to[j].size) ++j, to_at = 0;
  }
  return absl::OkStatus();
}

const char* PhaseName(int phase) {
  if (phase == kPhaseHeader) return "agreement headers";
  return phase == kPhaseVerdict ? "agreement verdicts" : "payload";
}

}  // namespace

const char* CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kBroadcast:
      return "Broadcast";
    case CollectiveOp::kScatter:
      return "Scatter";
    case CollectiveOp::kGather:
      return "Gather";
    case CollectiveOp::kAllGather:
      return "AllGather";
    case CollectiveOp::kAllToAll:
      return "AllToAll";
    case CollectiveOp::kBarrier:
      return "Barrier";
    case CollectiveOp::kSplit:
      return "Split";
  }
  return "Unknown";
}

struct Communicator::Call {
  std::unique_lock<std::mutex> lock;
  internal::Declaration decl;
  absl::Time start;
  absl::Time deadline;
  std::vector<uint64_t> params;                  // every rank's header param, after agreement
  std::vector<internal::ControlHeader> headers;  // every rank's round-1 header to this rank
  bool transport_failed = false;
};

Communicator::Communicator(CommunicatorOptions options) : options_(std::move(options)) {}

Communicator::~Communicator() = default;

Communicator::Call Communicator::Begin(CollectiveOp op, const CallOptions& options) {
  Call call{std::unique_lock<std::mutex>(call_mu_)};
  call.decl.op = op;
  call.decl.seq = ++seq_;
  call.start = absl::Now();
  call.deadline = Deadline(options);
  call.decl.send_bytes.assign(world_size(), 0);
  call.decl.recv_bytes.assign(world_size(), 0);
  call.decl.send_layout.assign(world_size(), 0);
  call.decl.recv_layout.assign(world_size(), 0);
  return call;
}

absl::Time Communicator::Deadline(const CallOptions& options) const {
  if (options.deadline != absl::InfiniteFuture()) return options.deadline;
  return absl::Now() +
         (options.timeout == absl::InfiniteDuration() ? options_.timeout : options.timeout);
}

std::string Communicator::Context(const Call& call) const {
  return absl::StrCat(CollectiveOpName(call.decl.op), " (backend=", backend(), ", rank=", rank(),
                      "/", world_size(), ", seq=", call.decl.seq, ")");
}

template <typename Fn>
absl::Status Communicator::Run(Call& call, Fn&& transfer) {
  if (absl::Status p = poisoned(); !p.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        Context(call), ": communicator must be recreated after an earlier failure: ", p.message()));
  }
  absl::Status status = Agree(call);
  if (status.ok()) status = transfer();
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(state_mu_);
    ++counters_[static_cast<int>(call.decl.op)].calls;
    return status;
  }
  status = Annotate(status, Context(call));
  if (call.transport_failed) {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (poisoned_.ok()) poisoned_ = status;
  }
  return status;
}

absl::Status Communicator::Move(Call& call, int phase, std::span<const SendOp> sends,
                                std::span<const RecvOp> recvs) {
  const uint64_t tag = Tag(call.decl.seq, phase);
  absl::Status status = phase < kPhasePayload
                            ? ExchangeControl(tag, call.decl.seq, sends, recvs, call.deadline)
                            : Exchange(tag, sends, recvs, call.deadline);
  if (!status.ok()) {
    call.transport_failed = true;
    return Annotate(
        status,
        absl::StrFormat("%s %s after %.3f s (%.3f s were left at the call's "
                        "start)",
                        PhaseName(phase), absl::IsDeadlineExceeded(status) ? "timed out" : "failed",
                        absl::ToDoubleSeconds(absl::Now() - call.start),
                        absl::ToDoubleSeconds(call.deadline - call.start)));
  }
  int64_t sent = 0, received = 0;
  for (const SendOp& s : sends) sent += s.size;
  for (const RecvOp& r : recvs) received += r.size;
  Count(call, phase == kPhasePayload, sent, received);
  return absl::OkStatus();
}

void Communicator::Count(const Call& call, bool payload, int64_t sent, int64_t received) {
  std::lock_guard<std::mutex> lock(state_mu_);
  OpCounters& c = counters_[static_cast<int>(call.decl.op)];
  (payload ? c.bytes_sent : c.control_bytes_sent) += sent;
  (payload ? c.bytes_received : c.control_bytes_received) += received;
}

absl::Status Communicator::Agree(Call& call) {
  const int n = world_size(), self = rank();
  const internal::Declaration& d = call.decl;
  std::vector<internal::ControlHeader> out(n), in(n);
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  for (int peer = 0; peer < n; ++peer) {
    out[peer] = internal::MakeHeader(d, peer);
    if (peer == self) continue;
    sends.push_back({peer, &out[peer], sizeof(out[peer])});
    recvs.push_back({peer, &in[peer], sizeof(in[peer])});
  }
  in[self] = out[self];
  SHARDKIT_RETURN_IF_ERROR(Move(call, kPhaseHeader, sends, recvs));
  for (const internal::ControlHeader& h : in) call.params.push_back(h.param);
  call.headers = in;
  SHARDKIT_RETURN_IF_ERROR(internal::CheckHeaders(d, in));
  if (!d.pairwise || n == 1) return absl::OkStatus();

  std::vector<internal::PairVerdict> verdicts(n);
  verdicts[self] = internal::LocalPairVerdict(d, self, in);
  sends.clear();
  recvs.clear();
  for (int peer = 0; peer < n; ++peer) {
    if (peer == self) continue;
    sends.push_back({peer, &verdicts[self], sizeof(verdicts[self])});
    recvs.push_back({peer, &verdicts[peer], sizeof(verdicts[peer])});
  }
  SHARDKIT_RETURN_IF_ERROR(Move(call, kPhaseVerdict, sends, recvs));
  return internal::CheckVerdicts(verdicts);
}

LocalProblem Communicator::CheckBuffer(const ConstBuffer& buffer, int index) const {
  if (buffer.size > 0 && buffer.data == nullptr) {
    return {LocalError::kNullBuffer, index, static_cast<int64_t>(buffer.size)};
  }
  if (!buffer.device.is_cpu() && !SupportsDevice(buffer.device)) {
    return {LocalError::kDevice, index, internal::EncodeDevice(buffer.device)};
  }
  return {};
}

LocalProblem Communicator::CheckBuffers(std::span<const ConstBuffer> buffers) const {
  LocalProblem problem = CheckCount(buffers.size(), world_size());
  for (size_t i = 0; i < buffers.size(); ++i) Note(problem, CheckBuffer(buffers[i], i));
  return problem;
}

absl::Status Communicator::Broadcast(MutableBuffer buffer, int root, const CallOptions& options) {
  Call call = Begin(CollectiveOp::kBroadcast, options);
  internal::Declaration& d = call.decl;
  d.root = root;
  d.check_root = true;
  d.param = buffer.size;
  d.check_param = true;
  Note(d.problem, CheckRoot(root, world_size()));
  Note(d.problem, CheckBuffer(buffer, -1));
  return Run(call, [&]() -> absl::Status {
    if (buffer.size == 0) return absl::OkStatus();
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    if (rank() == root) {
      for (int peer = 0; peer < world_size(); ++peer) {
        if (peer != root) sends.push_back({peer, buffer.data, buffer.size, buffer.device});
      }
    } else {
      recvs.push_back({root, buffer.data, buffer.size, buffer.device});
    }
    return Move(call, kPhasePayload, sends, recvs);
  });
}

absl::Status Communicator::Scatter(std::span<const ConstBuffer> sends, MutableBuffer recv, int root,
                                   const CallOptions& options) {
  std::vector<std::vector<ConstBuffer>> segments;
  for (const ConstBuffer& send : sends) segments.push_back({send});
  return ScatterSegments(segments, std::span<const MutableBuffer>(&recv, 1), root, options);
}

namespace {

std::vector<uint64_t> SegmentSizes(std::span<const ConstBuffer> segments) {
  std::vector<uint64_t> sizes;
  for (const ConstBuffer& segment : segments) sizes.push_back(segment.size);
  return sizes;
}

uint64_t TotalSize(std::span<const uint64_t> sizes) {
  uint64_t total = 0;
  for (uint64_t size : sizes) total += size;
  return total;
}

}  // namespace

absl::Status Communicator::ScatterSegments(std::span<const std::vector<ConstBuffer>> sends,
                                           std::span<const MutableBuffer> recvs, int root,
                                           const CallOptions& options) {
  Call call = Begin(CollectiveOp::kScatter, options);
  internal::Declaration& d = call.decl;
  const bool is_root = rank() == root;
  d.root = root;
  d.check_root = true;
  d.pairwise = true;
  Note(d.problem, CheckRoot(root, world_size()));
  const std::vector<ConstBuffer> recv_views(recvs.begin(), recvs.end());
  for (size_t k = 0; k < recv_views.size(); ++k) Note(d.problem, CheckBuffer(recv_views[k], k));
  if (is_root) {
    Note(d.problem, CheckCount(sends.size(), world_size()));
    for (size_t r = 0; r < sends.size(); ++r) {
      for (const ConstBuffer& segment : sends[r]) Note(d.problem, CheckBuffer(segment, r));
    }
  }
  const std::vector<uint64_t> recv_sizes = SegmentSizes(recv_views);
  const bool usable = d.problem.error == LocalError::kNone;
  if (usable && is_root) {
    const std::vector<uint64_t> self_sizes = SegmentSizes(sends[root]);
    Note(d.problem, CheckSelfSize(TotalSize(self_sizes), TotalSize(recv_sizes)));
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == root) continue;
      const std::vector<uint64_t> sizes = SegmentSizes(sends[peer]);
      d.send_bytes[peer] = TotalSize(sizes);
      d.send_layout[peer] = internal::LayoutDigest(sizes);
    }
  } else if (usable) {
    d.recv_bytes[root] = TotalSize(recv_sizes);
    d.recv_layout[root] = internal::LayoutDigest(recv_sizes);
  }
  return Run(call, [&]() -> absl::Status {
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    if (is_root) {
      // The root's own segments: copied in order into its receive segments (same total size).
      SHARDKIT_RETURN_IF_ERROR(CopySegmentsToSelf(sends[root], recvs));
      for (int peer = 0; peer < world_size(); ++peer) {
        if (peer == root) continue;
        for (const ConstBuffer& segment : sends[peer]) {
          if (segment.size > 0) out.push_back({peer, segment.data, segment.size, segment.device});
        }
      }
    } else {
      for (const MutableBuffer& segment : recvs) {
        if (segment.size > 0) in.push_back({root, segment.data, segment.size, segment.device});
      }
    }
    return Move(call, kPhasePayload, out, in);
  });
}

absl::Status Communicator::Gather(ConstBuffer send, std::span<const MutableBuffer> recvs, int root,
                                  const CallOptions& options) {
  Call call = Begin(CollectiveOp::kGather, options);
  internal::Declaration& d = call.decl;
  const bool is_root = rank() == root;
  d.root = root;
  d.check_root = true;
  d.pairwise = true;
  Note(d.problem, CheckRoot(root, world_size()));
  Note(d.problem, CheckBuffer(send, -1));
  std::vector<ConstBuffer> recv_views(recvs.begin(), recvs.end());
  if (is_root) Note(d.problem, CheckBuffers(recv_views));
  const bool usable = d.problem.error == LocalError::kNone;
  if (usable && is_root) {
    Note(d.problem, CheckSelfSize(send.size, recvs[root].size));
    for (int peer = 0; peer < world_size(); ++peer) d.recv_bytes[peer] = recvs[peer].size;
    d.recv_bytes[root] = 0;
  } else if (usable) {
    d.send_bytes[root] = send.size;
  }
  return Run(call, [&]() -> absl::Status {
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    if (is_root) {
      SHARDKIT_RETURN_IF_ERROR(CopyToSelf(send, recvs[root].data, recvs[root].device, send.size));
      for (int peer = 0; peer < world_size(); ++peer) {
        if (peer != root && recvs[peer].size > 0) {
          in.push_back({peer, recvs[peer].data, recvs[peer].size, recvs[peer].device});
        }
      }
    } else if (send.size > 0) {
      out.push_back({root, send.data, send.size, send.device});
    }
    return Move(call, kPhasePayload, out, in);
  });
}

absl::StatusOr<std::vector<std::string>> Communicator::AllGather(ConstBuffer send,
                                                                 const CallOptions& options) {
  Call call = Begin(CollectiveOp::kAllGather, options);
  call.decl.param = send.size;
  Note(call.decl.problem, CheckBuffer(send, -1));
  // Small host inputs (the engine's digests) travel inside the header: one round instead of two.
  // A peer's input came inline exactly when its header says so (inline_size == its size).
  const bool send_inline = send.size <= internal::kInlineBytes && send.device.is_cpu() &&
                           call.decl.problem.error == LocalError::kNone;
  if (send_inline) call.decl.inline_data = send;
  std::vector<std::string> result(world_size());
  absl::Status status = Run(call, [&]() -> absl::Status {
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    int64_t inline_sent = 0, inline_received = 0;
    for (int peer = 0; peer < world_size(); ++peer) result[peer].resize(call.params[peer]);
    SHARDKIT_RETURN_IF_ERROR(CopyToSelf(send, result[rank()].data(), Device::Cpu(), send.size));
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == rank()) continue;
      const internal::ControlHeader& header = call.headers[peer];
      if (send_inline) {
        inline_sent += static_cast<int64_t>(send.size);
      } else {
        out.push_back({peer, send.data, send.size, send.device});
      }
      if (header.inline_size == header.param) {
        std::memcpy(result[peer].data(), header.inline_data, result[peer].size());
        inline_received += static_cast<int64_t>(result[peer].size());
      } else {
        in.push_back({peer, result[peer].data(), result[peer].size()});
      }
    }
    Count(call, /*payload=*/true, inline_sent, inline_received);
    return Move(call, kPhasePayload, out, in);
  });
  if (!status.ok()) return status;
  return result;
}

absl::Status Communicator::AllToAll(std::span<const ConstBuffer> sends,
                                    std::span<const MutableBuffer> recvs,
                                    const CallOptions& options) {
  Call call = Begin(CollectiveOp::kAllToAll, options);
  internal::Declaration& d = call.decl;
  d.pairwise = true;
  const int self = rank();
  std::vector<ConstBuffer> recv_views(recvs.begin(), recvs.end());
  Note(d.problem, CheckBuffers(sends));
  Note(d.problem, CheckBuffers(recv_views));
  if (d.problem.error == LocalError::kNone) {
    Note(d.problem, CheckSelfSize(sends[self].size, recvs[self].size));
    for (int peer = 0; peer < world_size(); ++peer) {
      d.send_bytes[peer] = peer == self ? 0 : sends[peer].size;
      d.recv_bytes[peer] = peer == self ? 0 : recvs[peer].size;
    }
  }
  return Run(call, [&]() -> absl::Status {
    SHARDKIT_RETURN_IF_ERROR(
        CopyToSelf(sends[self], recvs[self].data, recvs[self].device, recvs[self].size));
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == self) continue;
      const ConstBuffer& s = sends[peer];
      const MutableBuffer& r = recvs[peer];
      if (s.size > 0) out.push_back({peer, s.data, s.size, s.device});
      if (r.size > 0) in.push_back({peer, r.data, r.size, r.device});
    }
    return Move(call, kPhasePayload, out, in);
  });
}

absl::Status Communicator::Barrier(const CallOptions& options) {
  // Round 1 of the agreement is itself a full-mesh barrier: a rank's header leaves only once the
  // rank has entered the call, and every rank waits for every header.
  Call call = Begin(CollectiveOp::kBarrier, options);
  return Run(call, [] { return absl::OkStatus(); });
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(std::span<const int> ranks,
                                                                  const CallOptions& options) {
  Call call = Begin(CollectiveOp::kSplit, options);
  internal::Declaration& d = call.decl;
  d.param = internal::DigestRanks(ranks);
  d.check_param = true;
  std::vector<bool> seen(world_size());
  int new_rank = -1;
  if (ranks.empty()) d.problem = {LocalError::kSplitRanks, 0, 0};
  for (size_t i = 0; i < ranks.size() && d.problem.error == LocalError::kNone; ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= world_size()) {
      d.problem = {LocalError::kSplitRanks, 1, r};
    } else if (seen[r]) {
      d.problem = {LocalError::kSplitRanks, 2, r};
    } else {
      seen[r] = true;
      if (r == rank()) new_rank = static_cast<int>(i);
    }
  }
  std::unique_ptr<Communicator> child;
  absl::Status status = Run(call, [&]() -> absl::Status {
    std::vector<int> members(ranks.begin(), ranks.end());
    SHARDKIT_ASSIGN_OR_RETURN(child,
                              CreateSubgroup(members, new_rank, call.decl.seq, call.deadline));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return child;
}

OpCounters Communicator::counters(CollectiveOp op) const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return counters_[static_cast<int>(op)];
}

OpCounters Communicator::total_counters() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  OpCounters total;
  for (const OpCounters& c : counters_) {
    total.calls += c.calls;
    total.bytes_sent += c.bytes_sent;
    total.bytes_received += c.bytes_received;
    total.control_bytes_sent += c.control_bytes_sent;
    total.control_bytes_received += c.control_bytes_received;
  }
  return total;
}

void Communicator::ResetCounters() {
  std::lock_guard<std::mutex> lock(state_mu_);
  counters_ = {};
}

absl::Status Communicator::poisoned() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return poisoned_;
}

namespace internal {

absl::Status RawExchange(Communicator& comm, std::span<const ConstBuffer> sends,
                         std::span<const MutableBuffer> recvs, const CallOptions& options) {
  std::vector<Communicator::SendOp> out;
  std::vector<Communicator::RecvOp> in;
  for (int peer = 0; peer < comm.world_size(); ++peer) {
    if (peer == comm.rank()) continue;
    if (static_cast<size_t>(peer) < sends.size() && sends[peer].size > 0) {
      out.push_back({peer, sends[peer].data, sends[peer].size});
    }
    if (static_cast<size_t>(peer) < recvs.size() && recvs[peer].size > 0) {
      in.push_back({peer, recvs[peer].data, recvs[peer].size});
    }
  }
  std::lock_guard<std::mutex> lock(comm.call_mu_);
  SHARDKIT_RETURN_IF_ERROR(comm.poisoned());
  const absl::Duration timeout =
      options.timeout == absl::InfiniteDuration() ? comm.default_timeout() : options.timeout;
  absl::Status status =
      comm.Exchange(Tag(++comm.raw_seq_, kPhaseRaw), out, in, absl::Now() + timeout);
  if (!status.ok()) {
    status = Annotate(status, absl::StrCat("RawExchange (backend=", comm.backend(),
                                           ", rank=", comm.rank(), "/", comm.world_size(), ")"));
    std::lock_guard<std::mutex> state_lock(comm.state_mu_);
    if (comm.poisoned_.ok()) comm.poisoned_ = status;
  }
  return status;
}

}  // namespace internal
}  // namespace shardkit
