// PreparedTransfer: Prepare is one segment call's agreement over every round; a round runs
// through the communicator's life cycle without one (Communicator::Resume); Close agrees again.
#include "core/comm/prepared_transfer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/comm/internal/call.h"
#include "core/comm/internal/segment_helpers.h"

namespace shardkit {
namespace {

std::string Sizes(std::span<const uint64_t> sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

}  // namespace

RoundShape RoundShape::Of(std::span<const std::vector<ConstBuffer>> sends,
                          std::span<const std::vector<MutableBuffer>> recvs) {
  RoundShape shape;
  for (const std::vector<ConstBuffer>& peer : sends) {
    shape.sends.push_back(internal::SegmentSizes(peer));
  }
  for (const std::vector<MutableBuffer>& peer : recvs) {
    shape.recvs.push_back(
        internal::SegmentSizes(std::vector<ConstBuffer>(peer.begin(), peer.end())));
  }
  return shape;
}

bool PreparedTransfer::Gathers(const Communicator& comm) { return comm.gathers_sends_; }

absl::StatusOr<PreparedTransfer> PreparedTransfer::Prepare(Communicator& comm,
                                                           std::vector<RoundShape> rounds,
                                                           uint64_t check,
                                                           const CallOptions& options) {
  Communicator::Call call = comm.Begin(CollectiveOp::kAllToAllSegments, options);
  internal::LocalProblem problem;
  if (rounds.empty()) problem = {.error = internal::LocalError::kNoRounds};
  comm.DeclareSegments(call, rounds, check, problem);
  SHARDKIT_RETURN_IF_ERROR(comm.Run(call, [] { return absl::OkStatus(); }));
  return PreparedTransfer(comm, std::move(rounds), check, call.decl.seq, call.deadline);
}

std::string PreparedTransfer::RoundLabel(size_t round) const {
  return absl::StrCat("round ", round + 1, " of ", shapes_.size(),
                      " of the transfer prepared at seq ", seq_);
}

absl::Status PreparedTransfer::CheckShape(size_t round,
                                          std::span<const std::vector<ConstBuffer>> sends,
                                          std::span<const std::vector<MutableBuffer>> recvs) const {
  if (round >= shapes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("round ", round + 1, " of a transfer prepared with ", shapes_.size()));
  }
  const RoundShape& want = shapes_[round];
  if (sends.size() != want.sends.size() || recvs.size() != want.recvs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(RoundLabel(round), ": ", sends.size(), " send and ", recvs.size(),
                     " receive lists, not one per rank (", want.sends.size(), ")"));
  }
  // Compared in place (a round's hot path); the sizes are listed only for the message.
  auto same = [](const auto& buffers, const std::vector<uint64_t>& sizes) {
    if (buffers.size() != sizes.size()) return false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (buffers[i].size != sizes[i]) return false;
    }
    return true;
  };
  for (size_t peer = 0; peer < want.sends.size(); ++peer) {
    if (same(sends[peer], want.sends[peer]) && same(recvs[peer], want.recvs[peer])) continue;
    const RoundShape got = RoundShape::Of(sends, recvs);
    const bool sending = got.sends[peer] != want.sends[peer];
    return absl::InvalidArgumentError(
        absl::StrCat(RoundLabel(round), ": segments ", sending ? "to" : "from", " rank ", peer,
                     " are ", Sizes(sending ? got.sends[peer] : got.recvs[peer]),
                     " bytes, prepared as ", Sizes(sending ? want.sends[peer] : want.recvs[peer])));
  }
  return absl::OkStatus();
}

absl::Status PreparedTransfer::Run(size_t round, std::span<const std::vector<ConstBuffer>> sends,
                                   std::span<const std::vector<MutableBuffer>> recvs,
                                   const Communicator::SegmentArrived* arrived) {
  Communicator::Call call = comm_.Resume(*this);
  call.round = round;
  absl::Status local = CheckShape(round, sends, recvs);
  if (local.ok()) {
    const internal::LocalProblem problem = comm_.CheckSegments(sends, recvs);
    if (problem.error != internal::LocalError::kNone) {
      local = absl::InvalidArgumentError(internal::DescribeLocalProblem(problem));
    }
  }
  ++runs_;
  return comm_.Run(call, [&]() -> absl::Status {
    // Whatever fails a round poisons: the peers are moving it already.
    absl::Status status = local.ok() ? comm_.TransferSegments(call, sends, recvs, arrived) : local;
    if (!status.ok()) call.transport_failed = true;
    return status;
  });
}

absl::Status PreparedTransfer::Close() {
  if (runs_ <= 1) return absl::OkStatus();
  Communicator::Call call =
      comm_.Begin(CollectiveOp::kAllToAllSegments, CallOptions{.deadline = deadline_});
  call.decl.param = check_;
  call.decl.check_param = true;
  call.decl.rounds = shapes_.size();
  return comm_.Run(call, [] { return absl::OkStatus(); });
}

}  // namespace shardkit
