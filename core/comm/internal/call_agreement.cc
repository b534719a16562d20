#include "core/comm/internal/call_agreement.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/tensor/device.h"

namespace shardkit::internal {
namespace {

constexpr uint32_t kHeaderMagic = 0x53484b31;   // "SHK1"
constexpr uint32_t kVerdictMagic = 0x53484b56;  // "SHKV"
// 4: headers all-gathered, pair sizes as digests. 5: headers gathered to rank 0, its verdict sent
// down (the headers too only when needed). 6: the header carries a prepared transfer's rounds.
constexpr uint16_t kVersion = 6;

std::string OpName(uint8_t op) {
  if (op >= 1 && op <= kNumCollectiveOps) {
    return std::string(CollectiveOpName(static_cast<CollectiveOp>(op)));
  }
  return absl::StrCat("op#", op);
}

std::string BufferName(int64_t index) {
  return index < 0 ? std::string("its buffer") : absl::StrCat("buffer ", index);
}

std::string DescribeProblem(const ControlHeader& h) {
  const int64_t value = h.error_value, limit = h.error_limit;
  switch (static_cast<LocalError>(h.error)) {
    case LocalError::kNone:
      return "no error";
    case LocalError::kRootOutOfRange:
      return absl::StrCat("root ", value, " is outside the group of ", limit, " ranks");
    case LocalError::kBufferCount:
      return absl::StrCat("passed ", value, " buffers, expected one per rank (", limit, ")");
    case LocalError::kNullBuffer:
      return absl::StrCat(BufferName(h.error_index), " has ", value, " bytes but no data pointer");
    case LocalError::kDevice:
      return absl::StrCat(BufferName(h.error_index), " is on device ",
                          DecodeDevice(value).ToString(), ", which this backend cannot access");
    case LocalError::kSelfSize:
      return absl::StrCat("sends ", value,
                          " bytes to itself but its receive buffer for itself has ", limit,
                          " bytes");
    case LocalError::kSplitEmpty:
      return "Split member list is empty";
    case LocalError::kSplitRankOutOfRange:
      return absl::StrCat("Split member list has rank ", value, ", outside the group");
    case LocalError::kSplitRankRepeated:
      return absl::StrCat("Split member list has rank ", value, " twice");
    case LocalError::kNoRounds:
      return "prepared a transfer of no rounds";
    case LocalError::kGather:
      if (value < 0) {
        return absl::StrCat(BufferName(h.error_index),
                            " is gathered (runs), which only AllToAllSegments sends to other "
                            "ranks take, on a backend that gathers");
      }
      return absl::StrCat(BufferName(h.error_index), " is gathered from runs of ", value,
                          " bytes in all but says it has ", limit);
  }
  return absl::StrCat("unknown argument error ", h.error);
}

// What a rank's header says it called, by its round count (ControlHeader::rounds).
std::string DescribeRounds(uint64_t rounds) {
  if (rounds == 0) return "called AllToAllSegments";
  return absl::StrCat("prepared a transfer of ", rounds, rounds == 1 ? " round" : " rounds");
}

std::string DescribeParamMismatch(CollectiveOp op, int r0, uint64_t p0, int r, uint64_t p) {
  if (op == CollectiveOp::kSplit) {
    return absl::StrCat("ranks disagree on the Split member list: rank ", r0, " and rank ", r,
                        " passed different lists");
  }
  if (op == CollectiveOp::kAllToAllSegments) {
    return absl::StrCat("ranks disagree on the AllToAllSegments check value: rank ", r0, " passed ",
                        p0, ", rank ", r, " passed ", p);
  }
  return absl::StrCat("ranks disagree on the buffer size: rank ", r0, " passed ", p0,
                      " bytes, rank ", r, " passed ", p, " bytes");
}

absl::Status CheckOps(std::span<const ControlHeader> headers) {
  const ControlHeader& h0 = headers[0];
  for (size_t r = 0; r < headers.size(); ++r) {
    const ControlHeader& h = headers[r];
    if (h.magic != kHeaderMagic || h.version != kVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " sent a malformed agreement header"));
    }
    if (h.op != h0.op || h.seq != h0.seq) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks called different operations: rank 0 called ", OpName(h0.op), " (seq ",
                       h0.seq, "), rank ", r, " called ", OpName(h.op), " (seq ", h.seq, ")"));
    }
  }
  return absl::OkStatus();
}

// splitmix64's finalizer: a well-mixed 64-bit function of one word.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A declared transfer's term in the pair digests: a hash of all four values, so that sums over
// senders and over receivers agree exactly when every transfer does. Only non-empty transfers
// count (DeclaredPairs): a rank declares only what it sends and receives.
uint64_t PairTerm(int64_t sender, int64_t receiver, uint64_t bytes, uint64_t segment_digest) {
  uint64_t h = Mix(static_cast<uint64_t>(sender));
  h = Mix(h ^ static_cast<uint64_t>(receiver));
  h = Mix(h ^ bytes);
  return Mix(h ^ segment_digest);
}

}  // namespace

std::string DescribeLocalProblem(const LocalProblem& problem) {
  ControlHeader h;
  h.error = static_cast<uint8_t>(problem.error);
  h.error_index = problem.index;
  h.error_value = problem.value;
  h.error_limit = problem.limit;
  return DescribeProblem(h);
}

ControlHeader MakeHeader(const Declaration& d, int self) {
  ControlHeader h;
  h.magic = kHeaderMagic;
  h.version = kVersion;
  h.op = static_cast<uint8_t>(d.op);
  h.error = static_cast<uint8_t>(d.problem.error);
  h.seq = d.seq;
  h.root = d.root;
  h.param = d.param;
  h.rounds = d.rounds;
  const std::vector<DeclaredPair> pairs = DeclaredPairs(d, self);
  for (const DeclaredPair& p : pairs) {
    if (p.sends) {
      h.sent_digest += PairTerm(self, p.peer, p.bytes, p.segment_digest);
    } else {
      h.expected_digest += PairTerm(p.peer, self, p.bytes, p.segment_digest);
    }
  }
  h.pairs_declared = pairs.size();
  h.error_index = d.problem.index;
  h.error_value = d.problem.value;
  h.error_limit = d.problem.limit;
  SHARDKIT_CHECK(d.inline_data.size <= kInlineBytes);
  h.inline_size = static_cast<uint32_t>(d.inline_data.size);
  if (d.inline_data.size > 0) std::memcpy(h.inline_data, d.inline_data.data, d.inline_data.size);
  return h;
}

absl::Status CheckHeaders(const Declaration& mine, std::span<const ControlHeader> headers) {
  if (absl::Status s = CheckOps(headers); !s.ok()) return s;
  for (size_t r = 0; r < headers.size(); ++r) {
    if (headers[r].error != static_cast<uint8_t>(LocalError::kNone)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid arguments on rank ", r, ": ", DescribeProblem(headers[r])));
    }
  }
  const ControlHeader& h0 = headers[0];
  for (size_t r = 1; r < headers.size(); ++r) {
    const ControlHeader& h = headers[r];
    if (mine.check_root && h.root != h0.root) {
      return absl::InvalidArgumentError(absl::StrCat("ranks disagree on the root: rank 0 passed ",
                                                     h0.root, ", rank ", r, " passed ", h.root));
    }
    if (mine.check_param && h.param != h0.param) {
      return absl::InvalidArgumentError(
          DescribeParamMismatch(mine.op, 0, h0.param, static_cast<int>(r), h.param));
    }
    if (h.rounds != h0.rounds) {
      return absl::InvalidArgumentError(absl::StrCat("ranks disagree on the transfer: rank 0 ",
                                                     DescribeRounds(h0.rounds), ", rank ", r, " ",
                                                     DescribeRounds(h.rounds)));
    }
  }
  return absl::OkStatus();
}

bool PairDigestsAgree(std::span<const ControlHeader> headers) {
  uint64_t sent = 0, expected = 0;  // sums modulo 2^64
  for (const ControlHeader& h : headers) {
    sent += h.sent_digest;
    expected += h.expected_digest;
  }
  return sent == expected;
}

namespace {

// Whether every rank passed AllGather the same input, inline (so the verdict can carry it).
bool SameInlineInput(std::span<const ControlHeader> headers) {
  const ControlHeader& h0 = headers[0];
  if (h0.inline_size != h0.param) return false;
  for (const ControlHeader& h : headers) {
    if (h.param != h0.param || h.inline_size != h0.inline_size ||
        std::memcmp(h.inline_data, h0.inline_data, h0.inline_size) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

AgreementVerdict Judge(const Declaration& mine, std::span<const ControlHeader> headers) {
  AgreementVerdict v;
  v.magic = kVerdictMagic;
  v.version = kVersion;
  v.kind = AgreementVerdict::kFull;
  if (!CheckHeaders(mine, headers).ok()) return v;
  if (mine.pairwise && !PairDigestsAgree(headers)) return v;
  if (mine.op == CollectiveOp::kAllGather) {
    if (!SameInlineInput(headers)) return v;
    v.param = headers[0].param;
    v.inline_size = headers[0].inline_size;
    std::memcpy(v.inline_data, headers[0].inline_data, sizeof(v.inline_data));
  }
  v.kind = AgreementVerdict::kAgreed;
  return v;
}

bool IsVerdict(const AgreementVerdict& v) {
  return v.magic == kVerdictMagic && v.version == kVersion &&
         (v.kind == AgreementVerdict::kFull || v.kind == AgreementVerdict::kAgreed) &&
         v.inline_size <= kInlineBytes;
}

ControlHeader CommonHeader(const AgreementVerdict& v) {
  ControlHeader h;
  h.param = v.param;
  h.inline_size = v.inline_size;
  std::memcpy(h.inline_data, v.inline_data, sizeof(h.inline_data));
  return h;
}

std::vector<DeclaredPair> DeclaredPairs(const Declaration& d, int self) {
  std::vector<DeclaredPair> pairs;
  if (!d.pairwise) return pairs;
  for (int sends = 1; sends >= 0; --sends) {
    const std::vector<uint64_t>& bytes = sends ? d.send_bytes : d.recv_bytes;
    const std::vector<uint64_t>& digests = sends ? d.send_segment_digest : d.recv_segment_digest;
    for (size_t peer = 0; peer < bytes.size(); ++peer) {
      if (bytes[peer] == 0 || static_cast<int>(peer) == self) continue;
      pairs.push_back(
          {static_cast<int64_t>(peer), bytes[peer], digests[peer], static_cast<uint64_t>(sends)});
    }
  }
  return pairs;
}

absl::Status CheckDeclaredPairs(std::span<const ControlHeader> headers,
                                std::span<const DeclaredPair> pairs) {
  // (sender, receiver) -> what the sender declared, what the receiver declared.
  struct Sides {
    DeclaredPair sent, expected;
  };
  std::map<std::pair<int64_t, int64_t>, Sides> transfers;
  size_t at = 0;
  for (size_t r = 0; r < headers.size(); ++r) {
    const int64_t self = static_cast<int64_t>(r);
    for (uint64_t i = 0; i < headers[r].pairs_declared && at < pairs.size(); ++i, ++at) {
      const DeclaredPair& p = pairs[at];
      if (p.sends) {
        transfers[{self, p.peer}].sent = p;
      } else {
        transfers[{p.peer, self}].expected = p;
      }
    }
  }
  for (const auto& [pair, sides] : transfers) {
    const DeclaredPair &sent = sides.sent, &expected = sides.expected;
    if (sent.bytes != expected.bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("byte counts disagree: rank ", pair.first, " sends ", sent.bytes,
                       " bytes to rank ", pair.second, ", which expects ", expected.bytes));
    }
    if (sent.segment_digest != expected.segment_digest) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment sizes disagree: rank ", pair.first, " sends ", sent.bytes,
                       " bytes to rank ", pair.second, " cut into other messages than it expects"));
    }
  }
  return absl::InternalError(
      "agreement: the ranks' digests of the per-pair sizes differ but their declarations agree "
      "(corrupt agreement data)");
}

uint64_t SegmentDigest(std::span<const uint64_t> segment_sizes) {
  uint64_t digest = 0xcbf29ce484222325ULL;  // FNV-1a over the non-zero sizes
  for (uint64_t size : segment_sizes) {
    if (size == 0) continue;
    for (int byte = 0; byte < 8; ++byte) {
      digest ^= (size >> (8 * byte)) & 0xff;
      digest *= 0x100000001b3ULL;
    }
  }
  return digest;
}

uint64_t RoundsDigest(std::span<const std::vector<uint64_t>> rounds) {
  uint64_t digest = rounds.empty() ? SegmentDigest({}) : SegmentDigest(rounds[0]);
  for (size_t r = 1; r < rounds.size(); ++r) {
    uint64_t bytes = 0;
    for (uint64_t size : rounds[r]) bytes += size;
    if (bytes > 0) digest = Mix(digest ^ Mix(r ^ Mix(SegmentDigest(rounds[r]))));
  }
  return digest;
}

int64_t EncodeDevice(const Device& device) {
  if (device.is_cpu()) return 0;
  return device.index() < 0 ? 1 : int64_t{device.index()} + 2;
}

Device DecodeDevice(int64_t code) {
  if (code == 0) return Device::Cpu();
  return code == 1 ? Device::Cuda() : Device::Cuda(static_cast<int>(code - 2));
}

uint64_t DigestRanks(std::span<const int> ranks) {
  // FNV-1a over the values and the count: stable across processes (unlike absl::Hash).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(ranks.size());
  for (int r : ranks) mix(static_cast<uint64_t>(static_cast<int64_t>(r)));
  return h;
}

}  // namespace shardkit::internal
