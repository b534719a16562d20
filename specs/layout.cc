#include "specs/layout.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/status_macros.h"
#include "core/tensor/dtype.h"

namespace shardkit::specs {
namespace {

using Wide = __int128;

absl::Status CheckShape(const Shape& global_shape) {
  // Element count in 63 bits (one byte per element keeps the check about elements only).
  return ComputeShapeSize(global_shape, DType::kUInt8).status();
}

std::vector<ShardMetadata> ChunkShards(int64_t dim, int64_t align,
                                       const std::vector<Placement>& placements,
                                       const Shape& global_shape) {
  const int64_t n = global_shape[dim];
  const int64_t k = static_cast<int64_t>(placements.size());
  const int64_t split = SplitSize(n, k, align);
  std::vector<ShardMetadata> shards;
  shards.reserve(placements.size());
  for (int64_t i = 0; i < k; ++i) {
    ShardMetadata shard{Shape(global_shape.size(), 0), global_shape, placements[i]};
    shard.offsets[dim] = ChunkOffset(n, split, i);
    shard.sizes[dim] = ChunkSize(n, split, i);
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::Status CheckRanksInWorld(const std::vector<ShardMetadata>& shards, int64_t world_size) {
  for (size_t i = 0; i < shards.size(); ++i) {
    const int64_t rank = shards[i].placement.rank();
    if (rank >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", i, " (", ShardToString(shards[i]), ") is placed on rank ", rank,
                       ", outside the world of ", world_size, " rank", world_size == 1 ? "" : "s"));
    }
  }
  return absl::OkStatus();
}

// The spec with explicit placements (shorthand expanded for `world_size`).
absl::StatusOr<ShardingSpec> ExpandSpec(const ShardingSpec& spec,
                                        std::optional<int64_t> world_size) {
  const auto* chunk = std::get_if<ChunkShardingSpec>(&spec);
  if (chunk == nullptr) return spec;
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Placement> placements,
                            ExpandPlacements(chunk->placements, world_size));
  return ChunkShardingSpec{chunk->dim, std::move(placements), chunk->align};
}

}  // namespace

int64_t SplitSize(int64_t n, int64_t k, int64_t align) {
  SHARDKIT_CHECK(n >= 0 && k >= 1 && align >= 1) << "n=" << n << " k=" << k << " align=" << align;
  const int64_t split = n / k + (n % k != 0 ? 1 : 0);
  const int64_t blocks = split / align + (split % align != 0 ? 1 : 0);
  return static_cast<int64_t>(std::min<Wide>(Wide{blocks} * align, INT64_MAX));
}

int64_t ChunkSize(int64_t n, int64_t split, int64_t i) {
  const Wide end = std::min<Wide>(n, Wide{split} * (i + 1));
  return static_cast<int64_t>(std::max<Wide>(end - Wide{split} * i, 0));
}

int64_t ChunkOffset(int64_t n, int64_t split, int64_t i) {
  return static_cast<int64_t>(std::min<Wide>(Wide{split} * i, n));
}

absl::StatusOr<int64_t> ResolveDim(int64_t dim, const Shape& global_shape) {
  const int64_t ndim = static_cast<int64_t>(global_shape.size());
  if (ndim == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a 0-d tensor cannot be chunked (dim ", dim, ", shape [])"));
  }
  if (dim < -ndim || dim >= ndim) {
    return absl::InvalidArgumentError(absl::StrCat("dim ", dim, " is out of range for a ", ndim,
                                                   "-d tensor (shape ", ShapeToString(global_shape),
                                                   "); expected ", -ndim, "..", ndim - 1));
  }
  return dim < 0 ? dim + ndim : dim;
}

absl::StatusOr<std::vector<ShardMetadata>> BuildMetadata(const ShardingSpec& spec,
                                                         const Shape& global_shape) {
  SHARDKIT_RETURN_IF_ERROR(CheckShape(global_shape));
  SHARDKIT_RETURN_IF_ERROR(ValidateSpec(spec));
  if (const auto* chunk = std::get_if<ChunkShardingSpec>(&spec)) {
    const auto* placements = std::get_if<std::vector<Placement>>(&chunk->placements);
    if (placements == nullptr) {
      return absl::InvalidArgumentError(
          "the placements shorthand must be expanded for a world size first (Bind)");
    }
    SHARDKIT_ASSIGN_OR_RETURN(int64_t dim, ResolveDim(chunk->dim, global_shape));
    return ChunkShards(dim, chunk->align, *placements, global_shape);
  }
  const auto& shards = std::get<EnumerableShardingSpec>(spec).shards;
  SHARDKIT_RETURN_IF_ERROR(ValidateTiling(shards, global_shape));
  return shards;
}

absl::StatusOr<BoundSpec> BindWithShards(const ShardingSpec& spec, const Shape& global_shape,
                                         std::optional<int64_t> world_size) {
  if (world_size.has_value()) SHARDKIT_RETURN_IF_ERROR(ValidateWorldSize(*world_size));
  SHARDKIT_RETURN_IF_ERROR(ValidateSpec(spec));
  SHARDKIT_ASSIGN_OR_RETURN(ShardingSpec bound, ExpandSpec(spec, world_size));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<ShardMetadata> shards, BuildMetadata(bound, global_shape));
  if (world_size.has_value()) SHARDKIT_RETURN_IF_ERROR(CheckRanksInWorld(shards, *world_size));
  if (auto* chunk = std::get_if<ChunkShardingSpec>(&bound)) {
    SHARDKIT_ASSIGN_OR_RETURN(chunk->dim, ResolveDim(chunk->dim, global_shape));
  }
  return BoundSpec{std::move(bound), std::move(shards)};
}

absl::StatusOr<ShardingSpec> Bind(const ShardingSpec& spec, const Shape& global_shape,
                                  std::optional<int64_t> world_size) {
  absl::StatusOr<BoundSpec> bound = BindWithShards(spec, global_shape, world_size);
  if (!bound.ok()) return bound.status();
  return std::move(bound).value().spec;
}

}  // namespace shardkit::specs
