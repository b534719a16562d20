// Layout arithmetic: from a spec and a global shape to the list of shards, and binding a spec to
// a shape and world size.
//
// Chunk specs follow PyTorch's ChunkShardingSpec.build_metadata (docs/architecture.md, "JSON
// formats") with shardkit's empty-shard semantics: over k placements of a dim of size n,
//   split      = ceil(n / k), rounded up to a multiple of the spec's align A: ceil(ceil(n/k)/A)*A
//   size(i)    = max(min(n, split*(i+1)) - split*i, 0)
//   offset(i)  = min(split*i, n)          (clamped: a zero-size chunk never starts past the end)
// and chunk i goes to placements[i]. Zero-size chunks are kept, so there is always one shard per
// placement, in placement order; a rank may appear several times or not at all. With A > 1 every
// boundary but the tensor's end is a multiple of A (block-quantized weights: README, "FP8
// block-quantized checkpoints"); the chunks past the end are then zero-size, as without A.
//
//   SHARDKIT_ASSIGN_OR_RETURN(ShardingSpec bound, Bind(spec, {12, 4}, /*world_size=*/3));
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<ShardMetadata> shards, BuildMetadata(bound, {12, 4}));
#ifndef SHARDKIT_SPECS_LAYOUT_H_
#define SHARDKIT_SPECS_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/shape.h"
#include "specs/shard_metadata.h"
#include "specs/sharding_spec.h"

namespace shardkit::specs {

// The arithmetic above; requires n >= 0, k >= 1, align >= 1, 0 <= i < k. Never overflows: a
// split past INT64_MAX saturates there (any split >= n gives the same chunks).
int64_t SplitSize(int64_t n, int64_t k, int64_t align = 1);
int64_t ChunkSize(int64_t n, int64_t split, int64_t i);
int64_t ChunkOffset(int64_t n, int64_t split, int64_t i);

// `dim` resolved for a tensor of `ndim` dims (negative counts from the end).
// Errors: kInvalidArgument if ndim == 0 ("a 0-d tensor cannot be chunked") or dim is outside
// [-ndim, ndim).
[[nodiscard]] absl::StatusOr<int64_t> ResolveDim(int64_t dim, const Shape& global_shape);

// The shards of a tensor of `global_shape` under `spec`, in the spec's order (chunk: one per
// placement; enumerable: as listed). Validates: the shape (non-negative, 63-bit element count),
// ValidateSpec, the chunk dim, and for enumerable specs ValidateTiling (in range, no overlap,
// exact cover). A shorthand placement list must be expanded first (Bind).
// Errors: kInvalidArgument saying which check failed.
[[nodiscard]] absl::StatusOr<std::vector<ShardMetadata>> BuildMetadata(const ShardingSpec& spec,
                                                                       const Shape& global_shape);

// The bound spec: same layout as `spec` on `global_shape`, with the chunk dim made non-negative
// and the placements shorthand expanded. Runs every BuildMetadata check and, when `world_size`
// is given, checks that every placement's rank is < world_size. Without a world size a shorthand
// cannot be expanded (error). Bound specs compare equal exactly when their layouts are equal as
// written: `dim: -1` and `dim: 1` bind to the same spec on a 2-d tensor.
// Errors: kInvalidArgument as BuildMetadata; a rank outside the world; shorthand without world;
// a world size outside [1, kMaxWorldSize].
[[nodiscard]] absl::StatusOr<ShardingSpec> Bind(const ShardingSpec& spec, const Shape& global_shape,
                                                std::optional<int64_t> world_size);

// Bind, with the bound spec's shards (its BuildMetadata), computed once.
struct BoundSpec {
  ShardingSpec spec;
  std::vector<ShardMetadata> shards;
};
[[nodiscard]] absl::StatusOr<BoundSpec> BindWithShards(const ShardingSpec& spec,
                                                       const Shape& global_shape,
                                                       std::optional<int64_t> world_size);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_LAYOUT_H_
