#include "core/comm/internal/call_agreement.h"

#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/tensor/device.h"

namespace shardkit::internal {
namespace {

constexpr uint32_t kHeaderMagic = 0x53484b31;   // "SHK1"
constexpr uint32_t kVerdictMagic = 0x53484b56;  // "SHKV"
constexpr uint16_t kVersion = 3;                // 3: named error fields, 32-bit inline size

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
  }
  return absl::StrCat("unknown argument error ", h.error);
}

std::string DescribeParamMismatch(CollectiveOp op, int r0, uint64_t p0, int r, uint64_t p) {
  if (op == CollectiveOp::kSplit) {
    return absl::StrCat("ranks disagree on the Split member list: rank ", r0, " and rank ", r,
                        " passed different lists");
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

}  // namespace

ControlHeader MakeHeader(const Declaration& d, int peer) {
  ControlHeader h;
  h.magic = kHeaderMagic;
  h.version = kVersion;
  h.op = static_cast<uint8_t>(d.op);
  h.error = static_cast<uint8_t>(d.problem.error);
  h.seq = d.seq;
  h.root = d.root;
  h.param = d.param;
  if (d.pairwise) {
    h.send_bytes = d.send_bytes[peer];
    h.recv_bytes = d.recv_bytes[peer];
    h.send_segment_digest = d.send_segment_digest[peer];
    h.recv_segment_digest = d.recv_segment_digest[peer];
  }
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
  }
  return absl::OkStatus();
}

PairVerdict LocalPairVerdict(const Declaration& mine, int self,
                             std::span<const ControlHeader> headers) {
  PairVerdict best;
  best.magic = kVerdictMagic;
  auto consider = [&](int64_t sender, int64_t receiver, uint64_t sent, uint64_t expected,
                      uint64_t sent_segments, uint64_t expected_segments) {
    if (sent == expected && sent_segments == expected_segments) return;
    if (best.found && std::tie(best.sender, best.receiver) <= std::tie(sender, receiver)) {
      return;
    }
    best.found = 1;
    best.sender = sender;
    best.receiver = receiver;
    best.sender_bytes = sent;
    best.receiver_bytes = expected;
    best.segments_differ = sent == expected ? 1 : 0;
  };
  for (int peer = 0; peer < static_cast<int>(headers.size()); ++peer) {
    if (peer == self) continue;
    consider(peer, self, headers[peer].send_bytes, mine.recv_bytes[peer],
             headers[peer].send_segment_digest, mine.recv_segment_digest[peer]);
    consider(self, peer, mine.send_bytes[peer], headers[peer].recv_bytes,
             mine.send_segment_digest[peer], headers[peer].recv_segment_digest);
  }
  return best;
}

absl::Status CheckVerdicts(std::span<const PairVerdict> verdicts) {
  const PairVerdict* best = nullptr;
  for (size_t r = 0; r < verdicts.size(); ++r) {
    const PairVerdict& v = verdicts[r];
    if (v.magic != kVerdictMagic) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " sent a malformed agreement verdict"));
    }
    if (!v.found) continue;
    if (best == nullptr ||
        std::tie(v.sender, v.receiver) < std::tie(best->sender, best->receiver)) {
      best = &v;
    }
  }
  if (best == nullptr) return absl::OkStatus();
  if (best->segments_differ) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment sizes disagree: rank ", best->sender, " sends ", best->sender_bytes,
        " bytes to rank ", best->receiver, " cut into other messages than it expects"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("byte counts disagree: rank ", best->sender, " sends ", best->sender_bytes,
                   " bytes to rank ", best->receiver, ", which expects ", best->receiver_bytes));
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
