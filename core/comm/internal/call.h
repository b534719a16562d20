// One collective call in flight: what Communicator's life cycle (communicator.cc) and the op
// bodies (collectives.cc) share. Internal to //core/comm.
#ifndef SHARDKIT_CORE_COMM_INTERNAL_CALL_H_
#define SHARDKIT_CORE_COMM_INTERNAL_CALL_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/comm/internal/call_agreement.h"

namespace shardkit {
namespace internal {

// The phases of a call. Each phase of each call has its own backend tag (Tag below).
enum class Phase : int {
  kHeader = 0,   // agreement round 1: the headers
  kVerdict = 1,  // agreement round 2: declared transfers, only after the pair digests differ
  kPayload = 2,  // the data
  kRaw = 3,      // RawExchange and prepared rounds: a sequence of their own (raw_seq_)
};

// The backend tag of `phase` of call `seq`. Control phases use fixed tags (matched in order per
// pair), so that ranks whose sequence numbers diverged still exchange headers and report the
// divergence instead of hanging.
inline uint64_t Tag(uint64_t seq, Phase phase) {
  const uint64_t p = static_cast<uint64_t>(phase);
  return phase >= Phase::kPayload ? (seq << 2) | p : p;
}

}  // namespace internal

struct Communicator::Call {
  std::unique_lock<std::mutex> lock;
  internal::Declaration decl;
  absl::Time start;
  absl::Time deadline;
  // After the agreement: every rank's round-1 header when the verdict was kFull (empty
  // otherwise), and after kAgreed what every rank's header shares (internal::CommonHeader).
  std::vector<internal::ControlHeader> headers;
  internal::ControlHeader common;
  bool transport_failed = false;
  // The payload's backend tag: Tag(seq, kPayload), or a prepared round's from raw_seq_.
  uint64_t payload_tag = 0;
  // A prepared round (Communicator::Resume): no agreement, not counted as a call; its errors name
  // it by transfer->RoundLabel(round) ("round 2 of 5 …"), made only when one is reported.
  bool prepared_round = false;
  const PreparedTransfer* transfer = nullptr;
  size_t round = 0;

  // What rank r's header says of the op's arguments (its param and inline data).
  const internal::ControlHeader& header(int r) const {
    return headers.empty() ? common : headers[static_cast<size_t>(r)];
  }
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_INTERNAL_CALL_H_
