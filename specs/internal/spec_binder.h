// JSON <-> ShardingSpec on nlohmann values (internal to //specs; plan.cc reuses it for rules).
#ifndef SHARDKIT_SPECS_INTERNAL_SPEC_BINDER_H_
#define SHARDKIT_SPECS_INTERNAL_SPEC_BINDER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/json/json_reader.h"
#include "specs/sharding_spec.h"

namespace shardkit::specs::internal {

using json::Json;

// Parses and validates (ValidateSpec) the spec at `path`. Errors: kInvalidArgument with the path.
[[nodiscard]] absl::StatusOr<ShardingSpec> SpecFromJson(const Json& value, std::string_view path);

// The canonical JSON value of `spec`: "version": 1 added, placements as written, a chunk's
// "align" only when it is not 1.
Json SpecToJson(const ShardingSpec& spec);
// The canonical text: json::Dump(SpecToJson(spec)), written without the DOM.
std::string SpecToText(const ShardingSpec& spec);

}  // namespace shardkit::specs::internal

#endif  // SHARDKIT_SPECS_INTERNAL_SPEC_BINDER_H_
