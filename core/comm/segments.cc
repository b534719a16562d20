// The segment calls: AllToAllSegments (one agreed round) and what PreparedTransfer's preparation
// and rounds share with it (the declaration of rounds, one round's payload, the buffers' checks).
#include <utility>
#include <vector>

#include "core/base/status_macros.h"
#include "core/comm/communicator.h"
#include "core/comm/internal/call.h"
#include "core/comm/internal/call_agreement.h"
#include "core/comm/internal/segment_helpers.h"
#include "core/comm/prepared_transfer.h"

namespace shardkit {

using internal::LocalError;
using internal::LocalProblem;
using internal::Note;

LocalProblem Communicator::CheckSegment(const ConstBuffer& segment, int peer) const {
  if (segment.runs.empty()) return CheckBuffer(segment, peer);
  if (!gathers_sends_ || peer == rank() || !segment.device.is_cpu()) {
    return {.error = LocalError::kGather, .index = peer, .value = -1};
  }
  uint64_t total = 0;
  for (const HostRun& run : segment.runs) {
    if (run.size > 0 && run.data == nullptr) {
      return {
          .error = LocalError::kNullBuffer, .index = peer, .value = static_cast<int64_t>(run.size)};
    }
    total += run.size;
  }
  if (total != segment.size) {
    return {.error = LocalError::kGather,
            .index = peer,
            .value = static_cast<int64_t>(total),
            .limit = static_cast<int64_t>(segment.size)};
  }
  return {};
}

LocalProblem Communicator::CheckSegments(std::span<const std::vector<ConstBuffer>> sends,
                                         std::span<const std::vector<MutableBuffer>> recvs) const {
  LocalProblem problem = internal::CheckCount(sends.size(), world_size());
  Note(problem, internal::CheckCount(recvs.size(), world_size()));
  for (size_t r = 0; r < recvs.size(); ++r) {
    for (const MutableBuffer& segment : recvs[r]) Note(problem, CheckBuffer(segment, r));
  }
  for (size_t r = 0; r < sends.size(); ++r) {
    for (const ConstBuffer& segment : sends[r]) Note(problem, CheckSegment(segment, r));
  }
  return problem;
}

void Communicator::DeclareSegments(Call& call, std::span<const RoundShape> rounds, uint64_t check,
                                   LocalProblem problem) {
  internal::Declaration& d = call.decl;
  d.pairwise = true;
  d.param = check;
  d.check_param = true;
  d.rounds = rounds.size();
  d.problem = problem;
  const int self = rank();
  std::vector<std::vector<uint64_t>> out(rounds.size()), in(rounds.size());
  for (const RoundShape& round : rounds) {
    if (round.sends.size() != static_cast<size_t>(world_size()) ||
        round.recvs.size() != static_cast<size_t>(world_size())) {
      Note(d.problem, internal::CheckCount(round.sends.size(), world_size()));
      Note(d.problem, internal::CheckCount(round.recvs.size(), world_size()));
      return;
    }
    Note(d.problem, internal::CheckSelfSize(internal::TotalSize(round.sends[self]),
                                            internal::TotalSize(round.recvs[self])));
  }
  if (d.problem.error != LocalError::kNone) return;
  for (int peer = 0; peer < world_size(); ++peer) {
    if (peer == self) continue;
    for (size_t r = 0; r < rounds.size(); ++r) {
      out[r] = rounds[r].sends[peer];
      in[r] = rounds[r].recvs[peer];
      d.send_bytes[peer] += internal::TotalSize(out[r]);
      d.recv_bytes[peer] += internal::TotalSize(in[r]);
    }
    d.send_segment_digest[peer] = internal::RoundsDigest(out);
    d.recv_segment_digest[peer] = internal::RoundsDigest(in);
  }
}

absl::Status Communicator::AllToAllSegments(std::span<const std::vector<ConstBuffer>> sends,
                                            std::span<const std::vector<MutableBuffer>> recvs,
                                            uint64_t check, const CallOptions& options,
                                            const SegmentArrived* arrived) {
  // A prepared transfer of one round, prepared and run in one call: its agreement covers the
  // round, so there is nothing to close.
  Call call = Begin(CollectiveOp::kAllToAllSegments, options);
  const LocalProblem problem = CheckSegments(sends, recvs);
  std::vector<RoundShape> round;
  if (problem.error == LocalError::kNone) round.push_back(RoundShape::Of(sends, recvs));
  DeclareSegments(call, round, check, problem);
  // 0, not 1: a rank calling AllToAllSegments while another prepares a transfer of one round
  // fails the agreement instead of moving its payload under another tag.
  call.decl.rounds = 0;
  return Run(call, [&] { return TransferSegments(call, sends, recvs, arrived); });
}

absl::Status Communicator::TransferSegments(Call& call,
                                            std::span<const std::vector<ConstBuffer>> sends,
                                            std::span<const std::vector<MutableBuffer>> recvs,
                                            const SegmentArrived* arrived) {
  const int self = rank();
  SHARDKIT_RETURN_IF_ERROR(internal::CopySegmentsToSelf(sends[self], recvs[self]));
  std::vector<SendOp> out;
  std::vector<RecvOp> in;
  std::vector<std::pair<int, size_t>> origin;  // in[i] is recvs[peer][index]
  for (int peer = 0; peer < world_size(); ++peer) {
    if (peer == self) continue;
    for (const ConstBuffer& s : sends[peer]) {
      if (s.size > 0) out.push_back({peer, s.data, s.size, s.device, s.runs});
    }
    for (size_t index = 0; index < recvs[peer].size(); ++index) {
      const MutableBuffer& r = recvs[peer][index];
      if (r.size == 0) continue;
      in.push_back({peer, r.data, r.size, r.device});
      origin.emplace_back(peer, index);
    }
  }
  auto nothing = [](int, size_t) { return absl::OkStatus(); };
  const SegmentArrived none(nothing);  // `nothing` must be named
  if (arrived == nullptr) arrived = &none;
  // Empty segments from `peer` from `index` on, until the next one with bytes: reported as soon
  // as what comes before them has arrived.
  auto empty_from = [&](int peer, size_t index) -> absl::Status {
    for (; index < recvs[peer].size() && recvs[peer][index].size == 0; ++index) {
      SHARDKIT_RETURN_IF_ERROR((*arrived)(peer, index));
    }
    return absl::OkStatus();
  };
  for (size_t index = 0; index < recvs[self].size(); ++index) {  // copied in already
    SHARDKIT_RETURN_IF_ERROR((*arrived)(self, index));
  }
  for (int peer = 0; peer < world_size(); ++peer) {
    if (peer != self) SHARDKIT_RETURN_IF_ERROR(empty_from(peer, 0));
  }
  auto report = [&](size_t i) -> absl::Status {
    SHARDKIT_RETURN_IF_ERROR((*arrived)(origin[i].first, origin[i].second));
    return empty_from(origin[i].first, origin[i].second + 1);
  };
  return MoveSegments(call, out, in, report);
}

}  // namespace shardkit
