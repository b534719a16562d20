// ShardMetadata: one shard of a tensor (offsets, sizes, placement), and the checks that a list of
// shards tiles a tensor exactly.
//
// Unlike PyTorch's ShardMetadata, offsets and sizes are integers by type, zero sizes
// are allowed everywhere (empty shards are first-class), and only a **positive-volume**
// intersection counts as overlap: a zero-size shard never overlaps anything, even strictly inside
// another shard.
//
//   ShardMetadata shard{{5, 0}, {5, 5}, Placement::ForRank(1)};
//   SHARDKIT_RETURN_IF_ERROR(ValidateShardMetadata(shard));
//   SHARDKIT_RETURN_IF_ERROR(ValidateTiling(shards, /*global_shape=*/{10, 5}));
#ifndef SHARDKIT_SPECS_SHARD_METADATA_H_
#define SHARDKIT_SPECS_SHARD_METADATA_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor/shape.h"
#include "specs/placement.h"

namespace shardkit::specs {

struct ShardMetadata {
  Shape offsets;
  Shape sizes;
  Placement placement = Placement::ForRank(0);

  friend bool operator==(const ShardMetadata& a, const ShardMetadata& b) {
    return a.offsets == b.offsets && a.sizes == b.sizes && a.placement == b.placement;
  }
  friend bool operator!=(const ShardMetadata& a, const ShardMetadata& b) { return !(a == b); }
};

// "offsets [5, 0], sizes [5, 5], rank:1/cpu".
std::string ShardToString(const ShardMetadata& shard);

// Checks one shard on its own: offsets and sizes have the same length, every offset and size is
// >= 0. Errors: kInvalidArgument naming the offending list.
[[nodiscard]] absl::Status ValidateShardMetadata(const ShardMetadata& shard);

// True if `a` and `b` share a region of positive volume (both must have the same rank).
bool Overlaps(const ShardMetadata& a, const ShardMetadata& b);

// Returns the indices (i < j) of some pair of shards that overlap, or nullopt. Every shard must
// have `ndim` dimensions and pass ValidateShardMetadata. Runs a sweep over dim 0: O(n log n) for
// 1-D and 2-D shards, O(n log n + n·a) otherwise, a being the largest number of positive-volume
// shards that one plane across dim 0 cuts.
std::optional<std::pair<size_t, size_t>> FindOverlap(const std::vector<ShardMetadata>& shards);

// FindOverlap as a check. Same preconditions. Errors: kInvalidArgument naming the first pair
// found: "shards 0 (offsets [0, 0], sizes [3, 3], rank:0/cpu) and 1 (...) overlap".
[[nodiscard]] absl::Status CheckNoOverlap(const std::vector<ShardMetadata>& shards);

// Checks that `shards` tile `global_shape` exactly, in this order (the first failure is reported):
//   1. at least one shard;
//   2. each shard is valid (ValidateShardMetadata) and has as many dims as the tensor;
//   3. each shard lies in range (offset + size <= dim size, without overflow);
//   4. no two shards overlap (positive volume);
//   5. the shards' volumes add up to the tensor's volume (with 3 and 4, exact coverage).
// `global_shape` must be valid (non-negative, element count fits in 63 bits).
// Errors: kInvalidArgument saying which check failed and naming the shard(s) by index.
[[nodiscard]] absl::Status ValidateTiling(const std::vector<ShardMetadata>& shards,
                                          const Shape& global_shape);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_SHARD_METADATA_H_
