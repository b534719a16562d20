// Strict JSON reading for specs, plans, safetensors headers and index.json.
//
// ParseJson rejects what nlohmann accepts silently or reports without context: duplicate keys
// (path), nesting deeper than kMaxJsonDepth, and turns syntax errors (including NaN/Infinity
// literals, invalid UTF-8 and numbers that overflow a double) into kInvalidArgument with line and
// column. The field helpers produce "<path>: expected integer, got \"x\"" style errors, the path
// written like `rules[1].spec.dim`. No exception escapes this header's functions.
#ifndef SHARDKIT_CORE_JSON_JSON_READER_H_
#define SHARDKIT_CORE_JSON_JSON_READER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace shardkit::json {

using Json = nlohmann::json;  // objects are std::map: keys come out sorted

inline constexpr int kMaxJsonDepth = 64;

// Errors: kInvalidArgument ("invalid JSON: parse error at line L, column C: ...", or
// "<path>: duplicate key \"k\"", or "<path>: JSON nesting deeper than 64 levels").
[[nodiscard]] absl::StatusOr<Json> ParseJson(std::string_view text);

// Compact serialization with sorted keys: the canonical byte form.
std::string Dump(const Json& value);

std::string ChildPath(std::string_view path, std::string_view key);
std::string IndexPath(std::string_view path, size_t index);

// A short description for error messages: "\"x\"" (truncated), 1.5, true, null, array, object.
std::string DescribeValue(const Json& value);

// "<path>: <message>" (the path "top level" when empty).
absl::Status PathError(std::string_view path, std::string_view message);
// `status` with "<path>: " prefixed to its message, code kept (unchanged when `path` is empty).
absl::Status AtPath(std::string_view path, const absl::Status& status);
// "<path>: expected <expected>, got <DescribeValue(got)>".
absl::Status TypeError(std::string_view path, std::string_view expected, const Json& got);

// Checks that `value` is an object whose keys are all in `allowed`.
[[nodiscard]] absl::Status CheckObject(const Json& value, std::string_view path,
                                       std::initializer_list<std::string_view> allowed);
// The member `key` of an object (checked with CheckObject). Error: "<path>: missing key \"k\"".
[[nodiscard]] absl::StatusOr<const Json*> Required(const Json& object, std::string_view path,
                                                   std::string_view key);
// nullptr if absent.
const Json* Optional(const Json& object, std::string_view key);

// Integers only (no 1.0), within int64. Errors name `path`.
[[nodiscard]] absl::StatusOr<int64_t> GetInt(const Json& value, std::string_view path);
[[nodiscard]] absl::StatusOr<std::string> GetString(const Json& value, std::string_view path);
[[nodiscard]] absl::StatusOr<std::vector<int64_t>> GetIntArray(const Json& value,
                                                               std::string_view path);
// An optional "version" member must be the integer 1.
[[nodiscard]] absl::Status CheckVersion(const Json& object, std::string_view path);

}  // namespace shardkit::json

#endif  // SHARDKIT_CORE_JSON_JSON_READER_H_
