// ParameterLayout: everything the sharding engine needs about one parameter's layout, computed
// identically on every rank from (spec or replicated, global shape, world size).
//
//   // Sharded:
//   SHARDKIT_ASSIGN_OR_RETURN(ParameterLayout layout, LayOutParameter(spec, {12, 4}, 3));
//   // Replicated (no rule matched): every rank gets the whole tensor.
//   SHARDKIT_ASSIGN_OR_RETURN(ParameterLayout rep, LayOutParameter(std::nullopt, {4}, 3));
//   for (const ShardMetadata& shard : layout.shards) { /* shard.placement.rank() ... */ }
//
// `canonical_json` is what index.json stores as "spec" and what the agreement step hashes:
// the bound canonical spec, or the JSON string "replicated" (quotes included).
#ifndef SHARDKIT_SPECS_PARAMETER_LAYOUT_H_
#define SHARDKIT_SPECS_PARAMETER_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/shape.h"
#include "specs/shard_metadata.h"
#include "specs/sharding_spec.h"

namespace shardkit::specs {

// The canonical JSON of a replicated parameter: "\"replicated\"".
inline constexpr std::string_view kReplicatedJson = "\"replicated\"";

struct ParameterLayout {
  // The bound spec (dim >= 0, explicit placements); nullopt for a replicated parameter.
  std::optional<ShardingSpec> spec;
  // Bound canonical JSON, or kReplicatedJson.
  std::string canonical_json;
  // Fingerprint(canonical_json): "sha256:<hex>".
  std::string fingerprint;
  // In the spec's order (chunk: placement order, zero-size chunks included; enumerable: as
  // listed). Replicated: one whole-tensor shard per rank, ranks 0..world_size-1 in order, with
  // placements "rank:R" (each rank's default device). shards[i].placement.rank() is the holder.
  std::vector<ShardMetadata> shards;
};

// `spec` nullopt means replicated. Validates the spec against the shape and world size (Bind).
// Errors: kInvalidArgument as Bind (dim out of range, 0-d chunked, shards that do not tile the
// tensor, a rank >= world_size, an invalid shape or world size).
[[nodiscard]] absl::StatusOr<ParameterLayout> LayOutParameter(
    const std::optional<ShardingSpec>& spec, const Shape& global_shape, int64_t world_size);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_PARAMETER_LAYOUT_H_
