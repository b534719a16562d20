#include "specs/internal/spec_binder.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace shardkit::specs::internal {
namespace {

using json::AtPath;
using json::CheckObject;
using json::CheckVersion;
using json::ChildPath;
using json::DescribeValue;
using json::Dump;
using json::GetInt;
using json::GetIntArray;
using json::GetString;
using json::IndexPath;
using json::Optional;
using json::PathError;
using json::Required;
using json::TypeError;

absl::StatusOr<Placement> PlacementFromJson(const Json& value, std::string_view path) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, GetString(value, path));
  absl::StatusOr<Placement> placement = Placement::Parse(text);
  if (!placement.ok()) return AtPath(path, placement.status());
  return placement;
}

absl::StatusOr<int64_t> RankFromJson(const Json& value, std::string_view path) {
  SHARDKIT_ASSIGN_OR_RETURN(int64_t rank, GetInt(value, path));
  if (rank < 0 || rank > kMaxRank) {
    return PathError(path, absl::StrCat("rank ", rank, " is outside [0, ", kMaxRank, "]"));
  }
  return rank;
}

// "all" or "a..b" (ASCII digits, no leading zeros, a <= b).
absl::StatusOr<RankSelection> RankStringFromJson(const std::string& text, std::string_view path) {
  if (text == "all") return AllRanks{};
  const size_t dots = text.find("..");
  if (dots != std::string::npos) {
    std::optional<int64_t> first = ParseRankDigits(std::string_view(text).substr(0, dots));
    std::optional<int64_t> last = ParseRankDigits(std::string_view(text).substr(dots + 2));
    if (first.has_value() && last.has_value() && *first <= *last) return RankRange{*first, *last};
  }
  return PathError(path, absl::StrCat("expected \"all\", \"a..b\" (ranks a <= b) or a list of "
                                      "ranks, got ",
                                      DescribeValue(Json(text))));
}

absl::StatusOr<RankSelection> RankSelectionFromJson(const Json& value, std::string_view path) {
  if (value.is_string()) return RankStringFromJson(value.get<std::string>(), path);
  if (!value.is_array()) return TypeError(path, "\"all\", \"a..b\" or a list of ranks", value);
  if (value.empty()) return PathError(path, "must not be empty");
  RankList ranks;
  ranks.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(int64_t rank, RankFromJson(value[i], IndexPath(path, i)));
    ranks.push_back(rank);
  }
  return ranks;
}

absl::StatusOr<PlacementShorthand> ShorthandFromJson(const Json& value, std::string_view path) {
  SHARDKIT_RETURN_IF_ERROR(CheckObject(value, path, {"ranks", "device"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* ranks, Required(value, path, "ranks"));
  PlacementShorthand shorthand;
  SHARDKIT_ASSIGN_OR_RETURN(shorthand.ranks,
                            RankSelectionFromJson(*ranks, ChildPath(path, "ranks")));
  if (const Json* device = Optional(value, "device"); device != nullptr) {
    const std::string device_path = ChildPath(path, "device");
    SHARDKIT_ASSIGN_OR_RETURN(std::string text, GetString(*device, device_path));
    absl::StatusOr<Device> parsed = Device::Parse(text);
    if (!parsed.ok()) return AtPath(device_path, parsed.status());
    shorthand.device = *parsed;
  }
  return shorthand;
}

absl::StatusOr<Placements> PlacementsFromJson(const Json& value, std::string_view path) {
  if (value.is_object()) return ShorthandFromJson(value, path);
  if (!value.is_array()) {
    return TypeError(path, "a list of placements or {\"ranks\": ..., \"device\": ...}", value);
  }
  if (value.empty()) return PathError(path, "must not be empty");
  std::vector<Placement> placements;
  placements.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(Placement p, PlacementFromJson(value[i], IndexPath(path, i)));
    placements.push_back(std::move(p));
  }
  return placements;
}

// An optional "align": an integer >= 1 (1 when absent).
absl::StatusOr<int64_t> AlignFromJson(const Json* value, std::string_view path) {
  if (value == nullptr) return 1;
  absl::StatusOr<int64_t> align = GetInt(*value, path);
  if (!align.ok() || *align < 1) return TypeError(path, "a positive integer", *value);
  return *align;
}

absl::StatusOr<ChunkShardingSpec> ChunkFromJson(const Json& value, std::string_view path) {
  SHARDKIT_RETURN_IF_ERROR(
      CheckObject(value, path, {"type", "version", "dim", "placements", "align"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* dim, Required(value, path, "dim"));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* placements, Required(value, path, "placements"));
  ChunkShardingSpec spec;
  SHARDKIT_ASSIGN_OR_RETURN(spec.dim, GetInt(*dim, ChildPath(path, "dim")));
  SHARDKIT_ASSIGN_OR_RETURN(spec.placements,
                            PlacementsFromJson(*placements, ChildPath(path, "placements")));
  SHARDKIT_ASSIGN_OR_RETURN(spec.align,
                            AlignFromJson(Optional(value, "align"), ChildPath(path, "align")));
  return spec;
}

absl::StatusOr<ShardMetadata> ShardFromJson(const Json& value, std::string_view path) {
  SHARDKIT_RETURN_IF_ERROR(CheckObject(value, path, {"offsets", "sizes", "placement"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* offsets, Required(value, path, "offsets"));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* sizes, Required(value, path, "sizes"));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* placement, Required(value, path, "placement"));
  ShardMetadata shard;
  SHARDKIT_ASSIGN_OR_RETURN(shard.offsets, GetIntArray(*offsets, ChildPath(path, "offsets")));
  SHARDKIT_ASSIGN_OR_RETURN(shard.sizes, GetIntArray(*sizes, ChildPath(path, "sizes")));
  SHARDKIT_ASSIGN_OR_RETURN(shard.placement,
                            PlacementFromJson(*placement, ChildPath(path, "placement")));
  if (absl::Status s = ValidateShardMetadata(shard); !s.ok()) return AtPath(path, s);
  return shard;
}

absl::StatusOr<EnumerableShardingSpec> EnumerableFromJson(const Json& value,
                                                          std::string_view path) {
  SHARDKIT_RETURN_IF_ERROR(CheckObject(value, path, {"type", "version", "shards"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* shards, Required(value, path, "shards"));
  const std::string shards_path = ChildPath(path, "shards");
  if (!shards->is_array()) return TypeError(shards_path, "array of shards", *shards);
  if (shards->empty()) return PathError(shards_path, "must not be empty");
  EnumerableShardingSpec spec;
  spec.shards.reserve(shards->size());
  for (size_t i = 0; i < shards->size(); ++i) {
    // Read without its path first (no string built per shard), again with it for the message.
    absl::StatusOr<ShardMetadata> shard = ShardFromJson((*shards)[i], "");
    if (!shard.ok()) shard = ShardFromJson((*shards)[i], IndexPath(shards_path, i));
    if (!shard.ok()) return shard.status();
    spec.shards.push_back(*std::move(shard));
  }
  return spec;
}

Json PlacementsToJson(const Placements& placements) {
  if (const auto* list = std::get_if<std::vector<Placement>>(&placements)) {
    Json out = Json::array();
    for (const Placement& p : *list) out.push_back(p.ToString());
    return out;
  }
  const auto& shorthand = std::get<PlacementShorthand>(placements);
  Json out = Json::object();
  if (shorthand.device.has_value()) out["device"] = shorthand.device->ToString();
  if (const auto* list = std::get_if<RankList>(&shorthand.ranks)) {
    out["ranks"] = *list;
  } else if (const auto* range = std::get_if<RankRange>(&shorthand.ranks)) {
    out["ranks"] = absl::StrCat(range->first, "..", range->last);
  } else {
    out["ranks"] = "all";
  }
  return out;
}

}  // namespace

absl::StatusOr<ShardingSpec> SpecFromJson(const Json& value, std::string_view path) {
  if (!value.is_object()) return TypeError(path, "spec object", value);
  SHARDKIT_ASSIGN_OR_RETURN(const Json* type_value, Required(value, path, "type"));
  const std::string type_path = ChildPath(path, "type");
  SHARDKIT_ASSIGN_OR_RETURN(std::string type, GetString(*type_value, type_path));
  ShardingSpec spec;
  if (type == "chunk") {
    SHARDKIT_ASSIGN_OR_RETURN(spec, ChunkFromJson(value, path));
  } else if (type == "enumerable") {
    SHARDKIT_ASSIGN_OR_RETURN(spec, EnumerableFromJson(value, path));
  } else {
    return TypeError(type_path, "\"chunk\" or \"enumerable\"", *type_value);
  }
  SHARDKIT_RETURN_IF_ERROR(CheckVersion(value, path));
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return AtPath(path, s);
  return spec;
}

namespace {

Json ChunkToJson(const ChunkShardingSpec& chunk) {
  Json out = Json::object();
  out["version"] = 1;
  out["type"] = "chunk";
  out["dim"] = chunk.dim;
  out["placements"] = PlacementsToJson(chunk.placements);
  // Only when it matters: specs without align keep their canonical bytes and fingerprints.
  if (chunk.align != 1) out["align"] = chunk.align;
  return out;
}

// `text` as a JSON string, as json::Dump writes it: printable ASCII but '"' and '\\' is copied.
void AppendString(std::string_view text, std::string* out) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    absl::StrAppend(out, Dump(Json(std::string(text))));
    return;
  }
  absl::StrAppend(out, "\"", absl::string_view(text.data(), text.size()), "\"");
}

void AppendInts(const std::vector<int64_t>& values, std::string* out) {
  absl::StrAppend(out, "[", absl::StrJoin(values, ","), "]");
}

// Written directly, not through a DOM: a spec of 10^5 shards is laid out for every parameter of
// every index.json read. Keys sorted, compact: the bytes json::Dump gives for the same object.
std::string EnumerableToText(const EnumerableShardingSpec& spec) {
  std::string out = "{\"shards\":[";
  for (size_t i = 0; i < spec.shards.size(); ++i) {
    const ShardMetadata& shard = spec.shards[i];
    absl::StrAppend(&out, i == 0 ? "" : ",", "{\"offsets\":");
    AppendInts(shard.offsets, &out);
    out += ",\"placement\":";
    AppendString(shard.placement.ToString(), &out);
    out += ",\"sizes\":";
    AppendInts(shard.sizes, &out);
    out += "}";
  }
  out += "],\"type\":\"enumerable\",\"version\":1}";
  return out;
}

// The chunk spec's canonical text without the DOM (a bound spec lists a placement per rank, and
// every parameter of every ShardParameter call is laid out): ChunkToJson's keys in sorted order,
// compact, as json::Dump writes them.
std::string ChunkToText(const ChunkShardingSpec& chunk) {
  std::string out = chunk.align != 1 ? absl::StrCat("{\"align\":", chunk.align, ",") : "{";
  absl::StrAppend(&out, "\"dim\":", chunk.dim, ",\"placements\":");
  if (const auto* list = std::get_if<std::vector<Placement>>(&chunk.placements)) {
    out += "[";
    for (size_t i = 0; i < list->size(); ++i) {
      if (i > 0) out += ",";
      AppendString((*list)[i].ToString(), &out);
    }
    out += "]";
  } else {
    out += Dump(PlacementsToJson(chunk.placements));  // the shorthand: a few keys
  }
  out += ",\"type\":\"chunk\",\"version\":1}";
  return out;
}

}  // namespace

Json SpecToJson(const ShardingSpec& spec) {
  if (const auto* chunk = std::get_if<ChunkShardingSpec>(&spec)) return ChunkToJson(*chunk);
  return Json::parse(EnumerableToText(std::get<EnumerableShardingSpec>(spec)));
}

std::string SpecToText(const ShardingSpec& spec) {
  if (const auto* chunk = std::get_if<ChunkShardingSpec>(&spec)) return ChunkToText(*chunk);
  return EnumerableToText(std::get<EnumerableShardingSpec>(spec));
}

}  // namespace shardkit::specs::internal
