// What `shardkit shard` ranks send each other before any data moves (one AllGather): every rank's
// options that must agree, then the source's checkpoint header.
//
//   std::string mine = EncodeRankOptions(options.write);
//   if (is_source) mine += EncodeHeader(source.header());
//   // after the AllGather, on every rank:
//   SHARDKIT_RETURN_IF_ERROR(CheckSameOptions(shared));
//   SHARDKIT_ASSIGN_OR_RETURN(Header h, DecodeHeader(shared[src].substr(kRankOptionsBytes), src));
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_HEADER_EXCHANGE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_HEADER_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

// The memory budget, the FP8 block size, --allow-misaligned-scales, --strict, the output format
// and a digest of --include/--exclude, 8 bytes each, little-endian.
inline constexpr size_t kRankOptionsBytes = 48;
std::string EncodeRankOptions(const ShardWriteOptions& options);

// Every rank's encoded options (each at least kRankOptionsBytes) must be the same: the budget sets
// the rounds every rank follows, the FP8 options and --strict the verdicts of checks every rank
// runs alone, the format what every rank writes, the selection which tensors every rank reads.
// Errors: kInvalidArgument naming the option and which ranks have which value — the same on every
// rank (computed from the same bytes).
[[nodiscard]] absl::Status CheckSameOptions(const std::vector<std::string>& shared);

// The source's header as bytes: the data region's size (8 bytes), then the JSON.
std::string EncodeHeader(const safetensors::Header& header);
// Errors: kInvalidArgument naming `src_rank` when it sent none or a malformed one.
[[nodiscard]] absl::StatusOr<safetensors::Header> DecodeHeader(std::string_view bytes,
                                                               int64_t src_rank);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_HEADER_EXCHANGE_H_
