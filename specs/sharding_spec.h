// Sharding specs: how one tensor is cut into shards and which rank holds each.
//
//   ChunkShardingSpec       PyTorch's rule: dim `dim` split into len(placements) chunks,
//                           chunk i on placements[i], the split optionally rounded up to a
//                           multiple of `align` (see layout.h for the arithmetic).
//   EnumerableShardingSpec  an explicit list of shards that must tile the tensor exactly.
//   ShardingSpec            one of the two.
//
// A chunk spec's placements are either an explicit list or the shorthand
// {"ranks": "all" | [0, 2, ...] | "a..b", "device": "cpu"}, expanded in order once the world size
// is known (Bind in layout.h). Specs are plain values: copyable, comparable with == (structural
// equality of what was written; for "same layout" compare bound canonical JSON, see spec_json.h).
//
//   ChunkShardingSpec spec{.dim = 0, .placements = std::vector<Placement>{
//       Placement::ForRank(0, Device::Cpu()), Placement::ForRank(1, Device::Cpu())}};
//   SHARDKIT_RETURN_IF_ERROR(ValidateSpec(spec));
#ifndef SHARDKIT_SPECS_SHARDING_SPEC_H_
#define SHARDKIT_SPECS_SHARDING_SPEC_H_

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/device.h"
#include "specs/placement.h"
#include "specs/shard_metadata.h"

namespace shardkit::specs {

// "ranks": "all" — ranks 0 .. world_size-1.
struct AllRanks {
  friend bool operator==(const AllRanks&, const AllRanks&) = default;
};

// "ranks": "first..last", inclusive; first <= last.
struct RankRange {
  int64_t first = 0;
  int64_t last = 0;
  friend bool operator==(const RankRange&, const RankRange&) = default;
};

// "ranks": [r0, r1, ...] in that order (repeats allowed: a rank may hold several chunks).
using RankList = std::vector<int64_t>;

using RankSelection = std::variant<AllRanks, RankList, RankRange>;

struct PlacementShorthand {
  RankSelection ranks = AllRanks{};
  std::optional<Device> device;  // nullopt: each rank's default device ("rank:R")
  friend bool operator==(const PlacementShorthand&, const PlacementShorthand&) = default;
};

using Placements = std::variant<std::vector<Placement>, PlacementShorthand>;

struct ChunkShardingSpec {
  int64_t dim = 0;  // negative: counts from the end, as in PyTorch
  Placements placements = std::vector<Placement>{};
  // >= 1: the split is rounded up to a multiple of `align`, so that every chunk boundary but the
  // tensor's end falls on a multiple of it (layout.h); 1 is PyTorch's rule.
  int64_t align = 1;
  friend bool operator==(const ChunkShardingSpec&, const ChunkShardingSpec&) = default;
};

struct EnumerableShardingSpec {
  std::vector<ShardMetadata> shards;
  friend bool operator==(const EnumerableShardingSpec&, const EnumerableShardingSpec&) = default;
};

using ShardingSpec = std::variant<ChunkShardingSpec, EnumerableShardingSpec>;

// Checks what can be checked without a shape or world size: chunk placements (list or shorthand
// rank list) non-empty, ranks within [0, kMaxRank], a range's first <= last, align >= 1; enumerable
// shards non-empty, each valid (ValidateShardMetadata), all with the same number of dims, no two
// overlapping (CheckNoOverlap).
// Errors: kInvalidArgument naming the placement or shard by index.
[[nodiscard]] absl::Status ValidateSpec(const ShardingSpec& spec);

// The explicit placement list: `placements` itself, or the shorthand expanded in order for
// `world_size` ranks. Does not check explicit ranks against the world size (Bind does).
// Errors: kInvalidArgument if a shorthand is expanded without a world size or with one outside
// [1, kMaxWorldSize], or if a rank range reaches past the world (checked before expanding).
[[nodiscard]] absl::StatusOr<std::vector<Placement>> ExpandPlacements(
    const Placements& placements, std::optional<int64_t> world_size);

// Checks that every placement (shorthand expanded) names a rank < world_size; needs no shape.
// Errors: kInvalidArgument naming the placement or shard; world_size outside [1, kMaxWorldSize].
[[nodiscard]] absl::Status ValidateRanks(const ShardingSpec& spec, int64_t world_size);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_SHARDING_SPEC_H_
