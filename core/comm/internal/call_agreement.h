// The agreement protocol every Communicator runs before a collective moves payload bytes.
//
// Round 1: every rank sends every peer one fixed-size ControlHeader (op, sequence number, root, an
// op-specific parameter, the first local argument error, and the bytes it will send to / expects
// from that peer). Every rank then holds all ranks' global fields and checks them identically, so
// a mismatch yields the same message everywhere. Round 2 (only for ops with per-pair sizes):
// every rank sends every peer the lowest sender/receiver size mismatch it saw (a PairVerdict);
// the lowest over all ranks is the error. Both rounds use fixed sizes, so a disagreement can never
// make a backend receive more bytes than it posted.
//
// Internal to core: the wire layout is host byte order (ranks of one job share an architecture).
#ifndef SHARDKIT_CORE_COMM_INTERNAL_CALL_AGREEMENT_H_
#define SHARDKIT_CORE_COMM_INTERNAL_CALL_AGREEMENT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/comm/communicator.h"

namespace shardkit::internal {

// A rank's own argument error, carried in its header so that every rank reports it.
enum class LocalError : uint8_t {
  kNone = 0,
  kRootOutOfRange,       // value = root, limit = group size
  kBufferCount,          // value = buffers passed, limit = group size
  kNullBuffer,           // index = the buffer, value = its size
  kDevice,               // index = the buffer, value = EncodeDevice(its device)
  kSelfSize,             // value = bytes sent to itself, limit = bytes it receives from itself
  kSplitEmpty,           // Split's member list is empty
  kSplitRankOutOfRange,  // value = the member outside the group
  kSplitRankRepeated,    // value = the member listed twice
};

struct LocalProblem {
  LocalError error = LocalError::kNone;
  int32_t index = -1;  // which buffer: its position in the op's list; -1 for the op's one buffer
  int64_t value = 0;   // the offending value (see LocalError)
  int64_t limit = 0;   // what `value` was checked against (see LocalError)
};

// AllGather inputs up to this size ride inside the round-1 header, which saves the payload round.
inline constexpr size_t kInlineBytes = 40;

// Fixed-size round-1 message (128 bytes).
struct ControlHeader {
  uint32_t magic = 0;
  uint8_t op = 0;
  uint8_t error = 0;  // LocalError
  uint16_t version = 0;
  uint64_t seq = 0;
  int64_t root = -1;
  uint64_t param = 0;       // Broadcast: size; AllGather: own length; Split: member-list digest
  uint64_t send_bytes = 0;  // what the sender sends to the receiver of this header
  uint64_t recv_bytes = 0;  // what the sender expects from the receiver of this header
  int64_t error_value = 0;  // LocalProblem::value
  int64_t error_limit = 0;  // LocalProblem::limit
  uint64_t send_segment_digest = 0;  // SegmentDigest of the segments sent to the receiver
  uint64_t recv_segment_digest = 0;  // SegmentDigest of the segments expected from the receiver
  uint32_t inline_size = 0;          // bytes of inline_data in use (Declaration::inline_data)
  int32_t error_index = -1;          // LocalProblem::index
  uint8_t inline_data[kInlineBytes] = {};
};
static_assert(sizeof(ControlHeader) == 128);

// Fixed-size round-2 message: the lowest mismatching (sender, receiver) pair a rank saw.
struct PairVerdict {
  uint32_t magic = 0;
  uint32_t found = 0;
  int64_t sender = 0, receiver = 0;
  uint64_t sender_bytes = 0, receiver_bytes = 0;
  uint64_t segments_differ = 0;  // 1: same byte count, different segment sizes
};
static_assert(sizeof(PairVerdict) == 48);

// What one rank declares about one call.
struct Declaration {
  CollectiveOp op = CollectiveOp::kBarrier;
  uint64_t seq = 0;
  int64_t root = -1;
  uint64_t param = 0;
  bool check_root = false;   // every rank must pass the same root
  bool check_param = false;  // every rank must pass the same param
  bool pairwise = false;     // per-pair sizes: run round 2
  LocalProblem problem;
  std::vector<uint64_t> send_bytes;           // per peer (pairwise ops)
  std::vector<uint64_t> recv_bytes;           // per peer (pairwise ops)
  std::vector<uint64_t> send_segment_digest;  // per peer: SegmentDigest (pairwise ops)
  std::vector<uint64_t> recv_segment_digest;  // per peer: SegmentDigest (pairwise ops)
  ConstBuffer inline_data;                    // copied into every header; at most kInlineBytes
};

// The header `self` sends to `peer`.
ControlHeader MakeHeader(const Declaration& d, int peer);

// Round-1 verdict from every rank's header (headers[r] = what r sent to this rank; headers[self]
// = this rank's own). Identical on every rank. Errors: kInvalidArgument describing the mismatch.
[[nodiscard]] absl::Status CheckHeaders(const Declaration& mine,
                                        std::span<const ControlHeader> headers);

// This rank's lowest pair mismatch given what its peers declared.
PairVerdict LocalPairVerdict(const Declaration& mine, int self,
                             std::span<const ControlHeader> headers);

// Round-2 verdict from every rank's PairVerdict. Errors: kInvalidArgument naming the pair.
[[nodiscard]] absl::Status CheckVerdicts(std::span<const PairVerdict> verdicts);

// Device <-> int64 for LocalError::kDevice (0 cpu, 1 cuda, N+2 cuda:N).
int64_t EncodeDevice(const Device& device);
Device DecodeDevice(int64_t code);

// Deterministic digest of the sizes of a transfer's non-empty segments, in order (a single
// buffer is one segment): sender and receiver must cut a transfer into the same messages.
uint64_t SegmentDigest(std::span<const uint64_t> segment_sizes);

// Deterministic digest of a member list (for Split's header).
uint64_t DigestRanks(std::span<const int> ranks);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_COMM_INTERNAL_CALL_AGREEMENT_H_
