// The agreement protocol every Communicator runs before a collective moves payload bytes.
//
// Round 1: each rank's fixed-size ControlHeader (op, sequence number, root, an op-specific
// parameter, the first local argument error, AllGather's inline data, and two digests of the
// per-pair byte counts it declared) goes up a binomial tree rooted at rank 0
// (Communicator::GatherControl): each rank receives its children's subtrees and sends its own
// subtree to its parent, so rank 0 ends up with every header. Rank 0 judges them (Judge) and sends
// an AgreementVerdict down the tree. kAgreed: every check passes (and, for AllGather, every rank
// passed the same inline input, which the verdict carries), and nothing else goes down. kFull:
// something is wrong, or AllGather's inputs differ; the verdict is followed down the tree by
// every header, and every rank checks them identically, so a mismatch yields the same message
// everywhere. Each rank exchanges with its parent and at most log2(n) children, in two to four
// steps, and the tree is 2·ceil(log2 n) hops deep. (A Bruck all-gather needs half the depth but
// wakes every rank log2(n) times per call; with many ranks per core, those wake-ups are what a
// call costs.) Pairwise sizes (ops with per-pair sizes): the sum over all ranks of the digests of
// what senders send must equal the sum of the digests of what receivers expect (PairTerm; a
// disagreement goes unnoticed with probability about 2^-64).
// Only when they differ, round 2 all-gathers every rank's declared transfers (DeclaredPair, the
// "full descriptors") the same way, and every rank names the same lowest mismatching
// sender/receiver pair. Round 1 has fixed sizes and round 2's sizes come from round 1, so a
// disagreement can never make a backend receive more bytes than it posted.
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
  kGather,               // index = the buffer; value = its runs' total, limit = its size; or
                         // value = -1: gathered where the op or backend cannot take it
  kNoRounds,             // a PreparedTransfer of no rounds
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
  uint64_t param = 0;        // Broadcast: size; AllGather: own length; Split: member-list digest
  uint64_t sent_digest = 0;  // sum of PairTerm over the transfers this rank sends
  uint64_t expected_digest = 0;  // sum of PairTerm over the transfers this rank receives
  int64_t error_value = 0;       // LocalProblem::value
  int64_t error_limit = 0;       // LocalProblem::limit
  uint64_t pairs_declared = 0;   // its non-empty transfers (DeclaredPairs' length)
  uint64_t rounds =
      0;  // PreparedTransfer: its round count (0 for every other call, AllToAllSegments too)
  uint32_t inline_size = 0;  // bytes of inline_data in use (Declaration::inline_data)
  int32_t error_index = -1;  // LocalProblem::index
  uint8_t inline_data[kInlineBytes] = {};
};
static_assert(sizeof(ControlHeader) == 128);

// Rank 0's word on round 1, the first thing sent down the tree (64 bytes).
struct AgreementVerdict {
  enum Kind : uint8_t {
    kFull = 0,    // every header follows; each rank checks them itself
    kAgreed = 1,  // every check passed; nothing follows
  };
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t kind = kFull;
  uint8_t reserved = 0;
  uint64_t param = 0;        // kAgreed AllGather: every rank's param (its input's length)
  uint32_t inline_size = 0;  // kAgreed AllGather: every rank's inline_size
  uint32_t reserved2 = 0;
  uint8_t inline_data[kInlineBytes] = {};  // kAgreed AllGather: every rank's inline input
};
static_assert(sizeof(AgreementVerdict) == 64);

// One non-empty transfer a rank declared, for round 2 (only after the digests differ).
struct DeclaredPair {
  int64_t peer = 0;
  uint64_t bytes = 0;
  uint64_t segment_digest = 0;
  uint64_t sends = 0;  // 1: this rank sends `bytes` to `peer`; 0: it expects them from `peer`
};
static_assert(sizeof(DeclaredPair) == 32);

// What one rank declares about one call.
struct Declaration {
  CollectiveOp op = CollectiveOp::kBarrier;
  uint64_t seq = 0;
  int64_t root = -1;
  uint64_t param = 0;
  bool check_root = false;   // every rank must pass the same root
  bool check_param = false;  // every rank must pass the same param
  bool pairwise = false;     // per-pair sizes: run round 2
  uint64_t rounds = 0;       // PreparedTransfer: its round count, checked equal on every rank
  LocalProblem problem;
  std::vector<uint64_t> send_bytes;           // per peer (pairwise ops)
  std::vector<uint64_t> recv_bytes;           // per peer (pairwise ops)
  std::vector<uint64_t> send_segment_digest;  // per peer: SegmentDigest (pairwise ops)
  std::vector<uint64_t> recv_segment_digest;  // per peer: SegmentDigest (pairwise ops)
  ConstBuffer inline_data;                    // copied into every header; at most kInlineBytes
};

// What a rank's argument error says, as the agreement words it ("buffer 2 has 8 bytes but …").
std::string DescribeLocalProblem(const LocalProblem& problem);

// This rank's header (`self` is its rank).
ControlHeader MakeHeader(const Declaration& d, int self);

// Round-1 verdict from every rank's header (headers[r] = rank r's). Identical on every rank.
// Errors: kInvalidArgument describing the mismatch.
[[nodiscard]] absl::Status CheckHeaders(const Declaration& mine,
                                        std::span<const ControlHeader> headers);

// Whether the senders' and receivers' digests of the per-pair sizes agree (then round 2 is
// skipped).
bool PairDigestsAgree(std::span<const ControlHeader> headers);

// Rank 0's verdict on every rank's header (`mine`: rank 0's declaration; the checks it selects
// are the same on every rank of one op).
AgreementVerdict Judge(const Declaration& mine, std::span<const ControlHeader> headers);

// Whether `v` is a verdict of this protocol version (a peer of another build sends none).
bool IsVerdict(const AgreementVerdict& v);

// The header fields an op body reads (param, inline data) shared by every rank after a kAgreed
// verdict.
ControlHeader CommonHeader(const AgreementVerdict& v);

// This rank's non-empty transfers, senders first (headers[self].pairs_declared of them).
std::vector<DeclaredPair> DeclaredPairs(const Declaration& d, int self);

// Round-2 verdict: `pairs` holds every rank's DeclaredPairs in rank order (headers[r].
// pairs_declared of rank r). Errors: kInvalidArgument naming the lowest sender/receiver pair
// whose sizes or segments disagree; kInternal if none does (a digest collision with the sums
// differing cannot happen, so this means corrupt declarations).
[[nodiscard]] absl::Status CheckDeclaredPairs(std::span<const ControlHeader> headers,
                                              std::span<const DeclaredPair> pairs);

// Device <-> int64 for LocalError::kDevice (0 cpu, 1 cuda, N+2 cuda:N).
int64_t EncodeDevice(const Device& device);
Device DecodeDevice(int64_t code);

// Deterministic digest of the sizes of a transfer's non-empty segments, in order (a single
// buffer is one segment): sender and receiver must cut a transfer into the same messages.
uint64_t SegmentDigest(std::span<const uint64_t> segment_sizes);

// The digest of one pair's segments over several rounds: SegmentDigest of round 0, with every
// later round that moves bytes mixed in with its index (so one round equals SegmentDigest).
uint64_t RoundsDigest(std::span<const std::vector<uint64_t>> rounds);

// Deterministic digest of a member list (for Split's header).
uint64_t DigestRanks(std::span<const int> ranks);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_COMM_INTERNAL_CALL_AGREEMENT_H_
