// The fast path of safetensors::ParseHeader: one SAX pass over the header's JSON straight into
// plain fields, no DOM (a rank file of a 10^5-shard directory has a 2.5 MB header; building and
// freeing its DOM cost more than reading it). It accepts only the well-formed shape
//
//   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [..], "data_offsets":
//   [b, e]}, ...}
//
// with no duplicate key anywhere, and gives up (nullopt) on anything else: the caller then parses
// the text again on the strict DOM path, which finds and words the error. What it accepts passes
// every check of the DOM path's reading; the checks of the values against each other are the
// caller's, on the entries in name order as the DOM path visits them, so both paths give the
// same header or the same first error.
#ifndef SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_INTERNAL_HEADER_SAX_H_
#define SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_INTERNAL_HEADER_SAX_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardkit::safetensors::internal {

// One tensor's fields as written; not yet checked against each other.
struct RawEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;  // every size <= INT64_MAX, at most 64 of them
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct RawHeader {
  std::vector<RawEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Nullopt when `json` is not of the shape above (or not JSON at all).
std::optional<RawHeader> ParseWellFormedHeader(std::string_view json);

}  // namespace shardkit::safetensors::internal

#endif  // SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_INTERNAL_HEADER_SAX_H_
