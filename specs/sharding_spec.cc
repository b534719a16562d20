#include "specs/sharding_spec.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace shardkit::specs {
namespace {

absl::Status CheckRank(int64_t rank, size_t index) {
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks[", index, "]: rank ", rank, " is outside [0, ", kMaxRank, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSelection(const RankSelection& ranks) {
  if (const auto* list = std::get_if<RankList>(&ranks)) {
    if (list->empty()) return absl::InvalidArgumentError("ranks must not be empty");
    for (size_t i = 0; i < list->size(); ++i) {
      SHARDKIT_RETURN_IF_ERROR(CheckRank((*list)[i], i));
    }
  } else if (const auto* range = std::get_if<RankRange>(&ranks)) {
    if (range->first < 0 || range->last > kMaxRank || range->first > range->last) {
      return absl::InvalidArgumentError(absl::StrCat("rank range ", range->first, "..", range->last,
                                                     " must satisfy 0 <= first <= last"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChunk(const ChunkShardingSpec& spec) {
  if (spec.align < 1) {
    return absl::InvalidArgumentError(absl::StrCat("align must be >= 1, got ", spec.align));
  }
  if (const auto* list = std::get_if<std::vector<Placement>>(&spec.placements)) {
    if (list->empty()) return absl::InvalidArgumentError("placements must not be empty");
    return absl::OkStatus();
  }
  return Annotate(ValidateSelection(std::get<PlacementShorthand>(spec.placements).ranks),
                  "placements");
}

absl::Status ValidateEnumerable(const EnumerableShardingSpec& spec) {
  if (spec.shards.empty()) return absl::InvalidArgumentError("shards must not be empty");
  const size_t ndim = spec.shards[0].offsets.size();
  for (size_t i = 0; i < spec.shards.size(); ++i) {
    const ShardMetadata& shard = spec.shards[i];
    SHARDKIT_RETURN_IF_ERROR(
        Annotate(ValidateShardMetadata(shard), absl::StrCat("shards[", i, "]")));
    if (shard.offsets.size() != ndim) {
      return absl::InvalidArgumentError(absl::StrCat("shards[", i, "] has ", shard.offsets.size(),
                                                     " dims but shards[0] has ", ndim));
    }
  }
  // Overlap needs no shape: two shards that share a region overlap in every tensor.
  return CheckNoOverlap(spec.shards);
}

std::vector<Placement> ForRanks(int64_t first, int64_t last, const std::optional<Device>& device) {
  std::vector<Placement> out;
  out.reserve(static_cast<size_t>(last - first + 1));
  for (int64_t r = first; r <= last; ++r) out.push_back(Placement::ForRank(r, device));
  return out;
}

}  // namespace

absl::Status ValidateSpec(const ShardingSpec& spec) {
  if (const auto* chunk = std::get_if<ChunkShardingSpec>(&spec)) return ValidateChunk(*chunk);
  return ValidateEnumerable(std::get<EnumerableShardingSpec>(spec));
}

absl::StatusOr<std::vector<Placement>> ExpandPlacements(const Placements& placements,
                                                        std::optional<int64_t> world_size) {
  if (const auto* list = std::get_if<std::vector<Placement>>(&placements)) return *list;
  const auto& shorthand = std::get<PlacementShorthand>(placements);
  SHARDKIT_RETURN_IF_ERROR(Annotate(ValidateSelection(shorthand.ranks), "placements"));
  if (!world_size.has_value()) {
    return absl::InvalidArgumentError(
        "the placements shorthand {\"ranks\": ...} can only be expanded once the world size is "
        "known");
  }
  SHARDKIT_RETURN_IF_ERROR(ValidateWorldSize(*world_size));
  if (const auto* list = std::get_if<RankList>(&shorthand.ranks)) {
    std::vector<Placement> out;
    out.reserve(list->size());
    for (int64_t rank : *list) out.push_back(Placement::ForRank(rank, shorthand.device));
    return out;
  }
  if (const auto* range = std::get_if<RankRange>(&shorthand.ranks)) {
    // Checked before expanding: "0..2000000000" must not allocate two billion placements.
    if (range->last >= *world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placements: rank range ", range->first, "..", range->last, " is outside the world of ",
          *world_size, " rank", *world_size == 1 ? "" : "s"));
    }
    return ForRanks(range->first, range->last, shorthand.device);
  }
  return ForRanks(0, *world_size - 1, shorthand.device);
}

absl::Status ValidateRanks(const ShardingSpec& spec, int64_t world_size) {
  SHARDKIT_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  std::vector<Placement> placements;
  if (const auto* chunk = std::get_if<ChunkShardingSpec>(&spec)) {
    SHARDKIT_ASSIGN_OR_RETURN(placements, ExpandPlacements(chunk->placements, world_size));
  } else {
    for (const ShardMetadata& shard : std::get<EnumerableShardingSpec>(spec).shards) {
      placements.push_back(shard.placement);
    }
  }
  for (size_t i = 0; i < placements.size(); ++i) {
    if (placements[i].rank() >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement ", i, " (\"", placements[i].ToString(), "\") names rank ",
                       placements[i].rank(), ", outside the world of ", world_size, " rank",
                       world_size == 1 ? "" : "s"));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardkit::specs
