#include "specs/spec_json.h"

#include "core/base/status_macros.h"
#include "core/json/json_reader.h"
#include "specs/internal/spec_binder.h"
#include "specs/layout.h"

namespace shardkit::specs {

absl::StatusOr<ShardingSpec> ParseSpec(std::string_view json_text) {
  SHARDKIT_ASSIGN_OR_RETURN(json::Json json, json::ParseJson(json_text));
  return internal::SpecFromJson(json, "");
}

absl::StatusOr<ShardingSpec> ParseSpecValue(const json::Json& value) {
  return internal::SpecFromJson(value, "");
}

std::string CanonicalJson(const ShardingSpec& spec) { return internal::SpecToText(spec); }

absl::StatusOr<std::string> BoundCanonicalJson(const ShardingSpec& spec, const Shape& global_shape,
                                               std::optional<int64_t> world_size) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardingSpec bound, Bind(spec, global_shape, world_size));
  return CanonicalJson(bound);
}

}  // namespace shardkit::specs
