// The call life cycle: sequence numbers, deadlines, the agreement, moving one phase through the
// backend, counters and poisoning. The op bodies are in collectives.cc.
#include "core/comm/communicator.h"

#include <algorithm>
#include <array>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/comm/agreement_tree.h"
#include "core/comm/internal/call.h"
#include "core/comm/internal/call_agreement.h"
#include "core/comm/prepared_transfer.h"

namespace shardkit {
namespace {

using internal::Phase;

const char* PhaseName(Phase phase) {
  if (phase == Phase::kHeader) return "agreement headers";
  return phase == Phase::kVerdict ? "agreement pair declarations" : "payload";
}

template <typename T>
std::span<std::byte> AsBytes(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
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
    case CollectiveOp::kAllToAllSegments:
      return "AllToAllSegments";
  }
  return "Unknown";
}

Communicator::Communicator(CommunicatorOptions options, bool gathers_sends)
    : options_(std::move(options)), gathers_sends_(gathers_sends) {}

Communicator::~Communicator() = default;

Communicator::Call Communicator::Begin(CollectiveOp op, const CallOptions& options) {
  Call call{std::unique_lock<std::mutex>(call_mu_)};
  call.decl.op = op;
  call.decl.seq = ++seq_;
  call.start = absl::Now();
  call.deadline = Deadline(options);
  call.decl.send_bytes.assign(world_size(), 0);
  call.decl.recv_bytes.assign(world_size(), 0);
  call.decl.send_segment_digest.assign(world_size(), 0);
  call.decl.recv_segment_digest.assign(world_size(), 0);
  call.payload_tag = internal::Tag(call.decl.seq, Phase::kPayload);
  return call;
}

Communicator::Call Communicator::Resume(const PreparedTransfer& transfer) {
  Call call{std::unique_lock<std::mutex>(call_mu_)};
  call.decl.op = CollectiveOp::kAllToAllSegments;
  // The backend's `seq` is the last call's: a peer that gave up during this round gave up on it.
  call.decl.seq = seq_;
  call.start = absl::Now();
  call.deadline = transfer.deadline_;
  call.payload_tag = internal::Tag(++raw_seq_, Phase::kRaw);
  call.prepared_round = true;
  call.transfer = &transfer;
  return call;
}

absl::Time Communicator::Deadline(const CallOptions& options) const {
  if (options.deadline != absl::InfiniteFuture()) return options.deadline;
  return absl::Now() +
         (options.timeout == absl::InfiniteDuration() ? options_.timeout : options.timeout);
}

std::string Communicator::Context(const Call& call) const {
  if (call.prepared_round) {
    return absl::StrCat(CollectiveOpName(call.decl.op), " (backend=", backend(), ", rank=", rank(),
                        "/", world_size(), ", ", call.transfer->RoundLabel(call.round), ")");
  }
  return absl::StrCat(CollectiveOpName(call.decl.op), " (backend=", backend(), ", rank=", rank(),
                      "/", world_size(), ", seq=", call.decl.seq, ")");
}

absl::Status Communicator::Run(Call& call, absl::FunctionRef<absl::Status()> transfer) {
  if (absl::Status p = poisoned(); !p.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        Context(call), ": communicator must be recreated after an earlier failure: ", p.message()));
  }
  absl::Status status = call.prepared_round ? absl::OkStatus() : Agree(call);
  if (status.ok()) status = transfer();
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!call.prepared_round) ++counters_[static_cast<int>(call.decl.op)].calls;
    return status;
  }
  status = Annotate(status, Context(call));
  if (call.transport_failed) {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (poisoned_.ok()) poisoned_ = status;
  }
  return status;
}

absl::Status Communicator::Move(Call& call, Phase phase, std::span<const SendOp> sends,
                                std::span<const RecvOp> recvs) {
  absl::Status status = phase == Phase::kPayload
                            ? Exchange(call.payload_tag, call.decl.seq, sends, recvs, call.deadline)
                            : ExchangeControl(internal::Tag(call.decl.seq, phase), call.decl.seq,
                                              sends, recvs, call.deadline);
  return Moved(call, phase, std::move(status), sends, recvs);
}

absl::Status Communicator::MoveSegments(Call& call, std::span<const SendOp> sends,
                                        std::span<const RecvOp> recvs,
                                        absl::FunctionRef<absl::Status(size_t)> arrived) {
  absl::Status status =
      ExchangeSegments(call.payload_tag, call.decl.seq, sends, recvs, call.deadline, arrived);
  return Moved(call, Phase::kPayload, std::move(status), sends, recvs);
}

absl::Status Communicator::Moved(Call& call, Phase phase, absl::Status status,
                                 std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
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
  Count(call, phase == Phase::kPayload, sent, received);
  return absl::OkStatus();
}

absl::Status Communicator::ExchangeSegments(uint64_t tag, uint64_t seq,
                                            std::span<const SendOp> sends,
                                            std::span<const RecvOp> recvs, absl::Time deadline,
                                            absl::FunctionRef<absl::Status(size_t)> arrived) {
  SHARDKIT_RETURN_IF_ERROR(Exchange(tag, seq, sends, recvs, deadline));
  for (size_t i = 0; i < recvs.size(); ++i) SHARDKIT_RETURN_IF_ERROR(arrived(i));
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
  std::vector<internal::ControlHeader> headers(n);
  headers[self] = internal::MakeHeader(d, self);
  internal::AgreementVerdict verdict;
  SHARDKIT_RETURN_IF_ERROR(GatherControl(call, Phase::kHeader, AsBytes(headers),
                                         std::vector<size_t>(n, sizeof(headers[0])), &verdict));
  if (verdict.kind == internal::AgreementVerdict::kAgreed) {
    call.common = internal::CommonHeader(verdict);
    return absl::OkStatus();
  }
  call.headers = std::move(headers);
  SHARDKIT_RETURN_IF_ERROR(internal::CheckHeaders(d, call.headers));
  if (!d.pairwise || internal::PairDigestsAgree(call.headers)) return absl::OkStatus();

  // Round 2, only after a disagreement: every rank's declared transfers, to name the pair.
  std::vector<size_t> sizes(n);
  size_t total = 0, before_self = 0;  // declared transfers: all, and of the ranks before this one
  for (int r = 0; r < n; ++r) {
    sizes[r] = call.headers[r].pairs_declared * sizeof(internal::DeclaredPair);
    if (r == self) before_self = total;
    total += call.headers[r].pairs_declared;
  }
  std::vector<internal::DeclaredPair> pairs(total);
  const std::vector<internal::DeclaredPair> mine = internal::DeclaredPairs(d, self);
  std::copy(mine.begin(), mine.end(), pairs.begin() + before_self);
  SHARDKIT_RETURN_IF_ERROR(GatherControl(call, Phase::kVerdict, AsBytes(pairs), sizes));
  return internal::CheckDeclaredPairs(call.headers, pairs);
}

absl::Status Communicator::GatherControl(Call& call, Phase phase, std::span<std::byte> all,
                                         std::span<const size_t> sizes,
                                         internal::AgreementVerdict* verdict) {
  // Up the binomial tree (agreement_tree.h): a rank receives its children's subtrees, then sends
  // its own subtree to its parent. Down: with a verdict, the root's goes first, from parent to
  // children; then, unless it is kAgreed, every other rank's data: a rank receives it from its
  // parent and sends each child what lies outside the child's subtree. Two to four exchanges per
  // rank, each with at most log2(n) + 1 peers.
  const int n = world_size(), self = rank();
  std::vector<size_t> at(n + 1, 0);  // byte offsets in `all`, by rank
  for (int r = 0; r < n; ++r) at[r + 1] = at[r] + sizes[r];
  auto subtree = [&](int r) {
    return std::pair<size_t, size_t>{at[r], at[SubtreeEnd(r, n)] - at[r]};
  };
  auto outside = [&](int r) {  // the ranks before and after r's subtree
    const size_t end = at[SubtreeEnd(r, n)];
    return std::array<std::pair<size_t, size_t>, 2>{{{0, at[r]}, {end, at[n] - end}}};
  };
  // The pieces outside r's subtree, to or from `peer`.
  auto add_outside = [&](int r, int peer, auto& ops) {
    for (const auto& [piece, length] : outside(r)) {
      if (length > 0) ops.push_back({peer, all.data() + piece, length});
    }
  };
  // Whether every other rank's data goes down: always without a verdict, else unless kAgreed.
  auto all_go_down = [&] {
    return verdict == nullptr || verdict->kind != internal::AgreementVerdict::kAgreed;
  };
  const std::vector<int> children = TreeChildren(self, n);
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  for (int child : children) {
    const auto [offset, bytes] = subtree(child);
    if (bytes > 0) recvs.push_back({child, all.data() + offset, bytes});
  }
  if (!recvs.empty()) SHARDKIT_RETURN_IF_ERROR(Move(call, phase, sends, recvs));
  recvs.clear();
  if (self == 0 && verdict != nullptr) {
    *verdict = internal::Judge(
        call.decl, std::span<const internal::ControlHeader>(
                       reinterpret_cast<const internal::ControlHeader*>(all.data()), n));
  }
  if (self != 0) {
    const int parent = TreeParent(self);
    const auto [offset, bytes] = subtree(self);
    if (bytes > 0) sends.push_back({parent, all.data() + offset, bytes});
    if (verdict != nullptr) {
      recvs.push_back({parent, verdict, sizeof(*verdict)});
    } else {
      add_outside(self, parent, recvs);
    }
    SHARDKIT_RETURN_IF_ERROR(Move(call, phase, sends, recvs));
    if (verdict != nullptr && !internal::IsVerdict(*verdict)) {
      call.transport_failed = true;  // the control stream cannot be trusted past this point
      return absl::InternalError(absl::StrCat(
          "rank ", parent, " sent a malformed agreement verdict (a rank of another build?)"));
    }
    recvs.clear();
    if (verdict != nullptr && all_go_down()) add_outside(self, parent, recvs);  // after it
    if (!recvs.empty()) SHARDKIT_RETURN_IF_ERROR(Move(call, phase, {}, recvs));
  }
  sends.clear();
  for (int child : children) {
    if (verdict != nullptr) sends.push_back({child, verdict, sizeof(*verdict)});
    if (all_go_down()) add_outside(child, child, sends);
  }
  return sends.empty() ? absl::OkStatus() : Move(call, phase, sends, {});
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

void Communicator::Abort() {
  std::unique_lock<std::mutex> call_lock(call_mu_, std::try_to_lock);
  if (!call_lock.owns_lock()) {
    Interrupt(/*idle=*/false);  // the call in flight fails, poisons and closes
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (poisoned_.ok()) {
      poisoned_ = absl::CancelledError(
          absl::StrCat("rank ", rank(), " was interrupted (", backend(), ", Communicator::Abort)"));
    }
  }
  Interrupt(/*idle=*/true);
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
  const absl::Time deadline = comm.Deadline(options);  // as Begin: after the lock
  SHARDKIT_RETURN_IF_ERROR(comm.poisoned());
  // Tagged with a sequence of its own; `seq` is the last call's, so that a peer that gave up
  // during this exchange (after that call) is seen as giving up on it, not on a later call.
  absl::Status status =
      comm.Exchange(internal::Tag(++comm.raw_seq_, Phase::kRaw), comm.seq_, out, in, deadline);
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
