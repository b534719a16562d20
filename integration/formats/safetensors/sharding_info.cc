#include "integration/formats/safetensors/sharding_info.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "nlohmann/json.hpp"

namespace shardkit::safetensors {
namespace {

absl::Status Invalid(std::string_view source, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(source), ": __metadata__ ", kDcpShardingInfoKey, ": ", what));
}

}  // namespace

std::string ShardingInfoJson(const std::map<std::string, Shape>& offsets) {
  nlohmann::json info = nlohmann::json::object();  // std::map-backed: keys come out sorted
  for (const auto& [name, at] : offsets) info[name] = {{"saved_offsets", at}};
  return info.dump();
}

absl::StatusOr<std::map<std::string, Shape>> ParseShardingInfo(std::string_view json,
                                                               std::string_view source) {
  const nlohmann::json info = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded()) return Invalid(source, "not valid JSON");
  if (!info.is_object()) return Invalid(source, "not a JSON object");
  std::map<std::string, Shape> out;
  for (const auto& [name, entry] : info.items()) {
    const std::string what = absl::StrCat("tensor ", QuoteName(name));
    if (!entry.is_object() || !entry.contains("saved_offsets") ||
        !entry["saved_offsets"].is_array()) {
      return Invalid(source, absl::StrCat(what, ": no \"saved_offsets\" list"));
    }
    Shape offsets;
    for (const nlohmann::json& value : entry["saved_offsets"]) {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        return Invalid(source, absl::StrCat(what, ": saved_offsets holds ", value.dump(),
                                            ", not a non-negative integer"));
      }
      offsets.push_back(value.get<int64_t>());
    }
    out.emplace(name, std::move(offsets));
  }
  return out;
}

}  // namespace shardkit::safetensors
