#include "specs/parameter_layout.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/tensor/dtype.h"
#include "specs/fingerprint.h"
#include "specs/layout.h"
#include "specs/spec_json.h"

namespace shardkit::specs {
namespace {

absl::StatusOr<ParameterLayout> Replicated(const Shape& global_shape, int64_t world_size) {
  SHARDKIT_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  SHARDKIT_RETURN_IF_ERROR(ComputeShapeSize(global_shape, DType::kUInt8).status());
  ParameterLayout layout;
  layout.canonical_json = std::string(kReplicatedJson);
  layout.shards.reserve(static_cast<size_t>(world_size));
  for (int64_t rank = 0; rank < world_size; ++rank) {
    layout.shards.push_back(
        ShardMetadata{Shape(global_shape.size(), 0), global_shape, Placement::ForRank(rank)});
  }
  return layout;
}

}  // namespace

absl::StatusOr<ParameterLayout> LayOutParameter(const std::optional<ShardingSpec>& spec,
                                                const Shape& global_shape, int64_t world_size) {
  ParameterLayout layout;
  if (spec.has_value()) {
    SHARDKIT_ASSIGN_OR_RETURN(BoundSpec bound, BindWithShards(*spec, global_shape, world_size));
    layout.shards = std::move(bound.shards);
    layout.canonical_json = CanonicalJson(bound.spec);
    layout.spec = std::move(bound.spec);
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(layout, Replicated(global_shape, world_size));
  }
  layout.fingerprint = Fingerprint(layout.canonical_json);
  return layout;
}

}  // namespace shardkit::specs
