// Parameter-name patterns of plan rules. A pattern matches the **whole** name:
//   *    any characters except '.', possibly none, within one dotted segment
//   **   a whole segment only: zero or more whole dotted segments
//        ("**.weight" matches "weight" and "a.b.weight"; "a.**" matches "a" and "a.b.c")
// every other character is literal.
//
//   MatchesPattern("layers.*.attn.qkv.weight", "layers.3.attn.qkv.weight");  // true
#ifndef SHARDKIT_SPECS_PATTERN_H_
#define SHARDKIT_SPECS_PATTERN_H_

#include <string_view>

#include "absl/status/status.h"

namespace shardkit::specs {

// Errors: kInvalidArgument for an empty pattern or "**" inside a segment ("a**", "***").
[[nodiscard]] absl::Status ValidatePattern(std::string_view pattern);

// Whether `name` matches `pattern` (which should pass ValidatePattern; a "**" inside a segment is
// then treated as two "*"). O(segments² · segment length²) at worst.
bool MatchesPattern(std::string_view pattern, std::string_view name);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_PATTERN_H_
