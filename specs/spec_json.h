// Specs as JSON: strict parsing, canonical form and bound canonical form.
//
// Input format (docs/architecture.md, "JSON formats"; summary in specs/README.md):
//   {"type": "chunk", "dim": 0, "placements": ["rank:0/cpu", "rank:1/cpu"]}
//   {"type": "chunk", "dim": -1, "placements": {"ranks": "all", "device": "cpu"}}
//   {"type": "chunk", "dim": 0, "placements": [...], "align": 128}
//   {"type": "enumerable", "shards": [{"offsets": [0], "sizes": [4], "placement": "rank:0"}]}
// with an optional "version": 1 (and, for a chunk spec, an optional "align" >= 1, default 1: see
// layout.h). Unknown keys, wrong types, non-integer numbers, duplicate keys, NaN/Infinity and
// invalid UTF-8 are errors naming the JSON path.
//
// Canonical form: serialized from the parsed value (never the input text), keys sorted, compact,
// integers only, "version": 1 present, placements as written, "align" only when it is not 1 (so
// a spec without it keeps its bytes and fingerprint). Bound form: the canonical form of
// Bind(spec, shape, world) (negative dim resolved, shorthand expanded). Two specs describe the
// same layout of a tensor exactly when their bound forms are byte-equal.
//
//   SHARDKIT_ASSIGN_OR_RETURN(ShardingSpec spec, ParseSpec(text));
//   std::string canonical = CanonicalJson(spec);
//   SHARDKIT_ASSIGN_OR_RETURN(std::string bound, BoundCanonicalJson(spec, {12, 4}, 2));
#ifndef SHARDKIT_SPECS_SPEC_JSON_H_
#define SHARDKIT_SPECS_SPEC_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/json/json_reader.h"
#include "core/tensor/shape.h"
#include "specs/sharding_spec.h"

namespace shardkit::specs {

// Errors: kInvalidArgument: "invalid JSON: parse error at line L, column C: ..." for syntax
// (NaN, Infinity, invalid UTF-8, overflowing numbers included), "<path>: <what>" otherwise, e.g.
// `dim: expected integer, got "x"`, `align: expected a positive integer, got 0`,
// `placements[1]: invalid placement "worker0/cpu": ...`,
// `top level: duplicate key "dim"`, `shards[2]: sizes must be >= 0, found sizes [-1, 4]`.
[[nodiscard]] absl::StatusOr<ShardingSpec> ParseSpec(std::string_view json_text);

// The same from a value already parsed (strictly: json::ParseJson), without printing and parsing
// it again — for specs inside larger files (a shard directory's index.json). Errors: as ParseSpec
// but for syntax, paths relative to the value.
[[nodiscard]] absl::StatusOr<ShardingSpec> ParseSpecValue(const json::Json& value);

// The canonical bytes of `spec` (which need not be valid).
std::string CanonicalJson(const ShardingSpec& spec);

// CanonicalJson(Bind(spec, global_shape, world_size)). Errors: as Bind.
[[nodiscard]] absl::StatusOr<std::string> BoundCanonicalJson(const ShardingSpec& spec,
                                                             const Shape& global_shape,
                                                             std::optional<int64_t> world_size);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_SPEC_JSON_H_
