#include "integration/formats/shard_dir/shard_dir.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/json/json_reader.h"
#include "core/os/files.h"
#include "specs/spec_json.h"

namespace shardkit::shard_dir {
namespace {

namespace fs = std::filesystem;
using json::AtPath;
using json::CheckObject;
using json::ChildPath;
using json::DescribeValue;
using json::Dump;
using json::GetInt;
using json::GetIntArray;
using json::GetString;
using json::IndexPath;
using json::Json;
using json::PathError;
using json::Required;
using json::TypeError;
using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kRankPrefix = "rank-";
constexpr std::string_view kRankSuffix = ".safetensors";

// `value`, or its error with "<path>: " prefixed.
template <typename T>
absl::StatusOr<T> At(std::string_view path, absl::StatusOr<T> value) {
  if (!value.ok()) return AtPath(path, value.status());
  return value;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return isdigit(c); });
}

OrderedJson ShardToJson(const IndexShard& shard) {
  return {{"offsets", shard.metadata.offsets},
          {"sizes", shard.metadata.sizes},
          {"rank", shard.metadata.placement.rank()},
          {"file", shard.file},
          {"tensor", shard.tensor}};
}

OrderedJson ParameterToJson(const IndexParameter& parameter) {
  OrderedJson shards = OrderedJson::array();
  for (const IndexShard& shard : parameter.shards) shards.push_back(ShardToJson(shard));
  return {{"dtype", SafetensorsName(parameter.dtype)},
          {"shape", parameter.shape},
          {"spec", OrderedJson::parse(parameter.spec_json)},
          {"fingerprint", parameter.fingerprint},
          {"shards", std::move(shards)}};
}

absl::StatusOr<IndexShard> ParseShard(const Json& value, const std::string& path) {
  SHARDKIT_RETURN_IF_ERROR(
      CheckObject(value, path, {"offsets", "sizes", "rank", "file", "tensor"}));
  IndexShard shard;
  SHARDKIT_ASSIGN_OR_RETURN(const Json* offsets, Required(value, path, "offsets"));
  SHARDKIT_ASSIGN_OR_RETURN(shard.metadata.offsets,
                            GetIntArray(*offsets, ChildPath(path, "offsets")));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* sizes, Required(value, path, "sizes"));
  SHARDKIT_ASSIGN_OR_RETURN(shard.metadata.sizes, GetIntArray(*sizes, ChildPath(path, "sizes")));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* rank_json, Required(value, path, "rank"));
  SHARDKIT_ASSIGN_OR_RETURN(int64_t rank, GetInt(*rank_json, ChildPath(path, "rank")));
  if (rank < 0 || rank > specs::kMaxRank) return PathError(ChildPath(path, "rank"), "out of range");
  shard.metadata.placement = specs::Placement::ForRank(rank);
  SHARDKIT_ASSIGN_OR_RETURN(const Json* file, Required(value, path, "file"));
  SHARDKIT_ASSIGN_OR_RETURN(shard.file, GetString(*file, ChildPath(path, "file")));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* tensor, Required(value, path, "tensor"));
  SHARDKIT_ASSIGN_OR_RETURN(shard.tensor, GetString(*tensor, ChildPath(path, "tensor")));
  return shard;
}

// The listed shards must be exactly the layout of the spec: same shards, files and names.
absl::Status CheckShardsMatchLayout(const IndexParameter& parameter,
                                    const specs::ParameterLayout& layout, const std::string& path) {
  // Shard for shard equal to the layout, which tiles the tensor (LayOutParameter checked it).
  if (parameter.shards.size() != layout.shards.size()) {
    return PathError(ChildPath(path, "shards"),
                     absl::StrCat("the spec has ", layout.shards.size(), " shards, ",
                                  parameter.shards.size(), " are listed"));
  }
  const std::vector<std::string> tensors = ShardTensorNames(parameter.name, layout.shards);
  for (size_t i = 0; i < layout.shards.size(); ++i) {
    const IndexShard& shard = parameter.shards[i];
    const specs::ShardMetadata& want = layout.shards[i];
    const std::string shard_path = IndexPath(ChildPath(path, "shards"), i);
    if (shard.metadata.offsets != want.offsets || shard.metadata.sizes != want.sizes ||
        shard.metadata.placement.rank() != want.placement.rank()) {
      return PathError(shard_path, absl::StrCat("does not match the spec's shard (",
                                                specs::ShardToString(want), ")"));
    }
    const std::string& tensor = tensors[i];
    if (shard.file != RankFileName(want.placement.rank()) || shard.tensor != tensor) {
      return PathError(shard_path,
                       absl::StrCat("expected file \"", RankFileName(want.placement.rank()),
                                    "\" and tensor ", QuoteName(tensor)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<IndexParameter> ParseParameter(const std::string& name, const Json& value,
                                              int64_t world_size, const std::string& path) {
  SHARDKIT_RETURN_IF_ERROR(AtPath(path, CheckNoShardSuffix(name)));
  SHARDKIT_RETURN_IF_ERROR(
      CheckObject(value, path, {"dtype", "shape", "spec", "fingerprint", "shards"}));
  IndexParameter parameter;
  parameter.name = name;
  SHARDKIT_ASSIGN_OR_RETURN(const Json* dtype, Required(value, path, "dtype"));
  SHARDKIT_ASSIGN_OR_RETURN(std::string dtype_name, GetString(*dtype, ChildPath(path, "dtype")));
  SHARDKIT_ASSIGN_OR_RETURN(parameter.dtype,
                            At(ChildPath(path, "dtype"), DTypeFromSafetensors(dtype_name)));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* shape, Required(value, path, "shape"));
  SHARDKIT_ASSIGN_OR_RETURN(parameter.shape, GetIntArray(*shape, ChildPath(path, "shape")));
  SHARDKIT_RETURN_IF_ERROR(AtPath(ChildPath(path, "shape"),
                                  ComputeShapeSize(parameter.shape, parameter.dtype).status()));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* spec, Required(value, path, "spec"));
  if (!(spec->is_string() && spec->get<std::string>() == "replicated")) {
    SHARDKIT_ASSIGN_OR_RETURN(parameter.spec,
                              At(ChildPath(path, "spec"), specs::ParseSpecValue(*spec)));
    // The bound form lists every placement. Checked before laying out, as below: expanding a
    // shorthand for the file's world_size would allocate one placement per rank.
    const auto* chunk = std::get_if<specs::ChunkShardingSpec>(&*parameter.spec);
    if (chunk != nullptr && std::holds_alternative<specs::PlacementShorthand>(chunk->placements)) {
      return PathError(ChildPath(path, "spec"),
                       "not the bound canonical form: placements must be listed, not given as "
                       "{\"ranks\": ...}");
    }
  }
  SHARDKIT_ASSIGN_OR_RETURN(const Json* shards, Required(value, path, "shards"));
  if (!shards->is_array()) return TypeError(ChildPath(path, "shards"), "array", *shards);
  // A replicated parameter has one shard per rank: checked before laying out, so that the
  // layout's size is bounded by the file, not by its world_size (up to specs::kMaxWorldSize).
  if (!parameter.spec.has_value() && shards->size() != static_cast<size_t>(world_size)) {
    return PathError(ChildPath(path, "shards"),
                     absl::StrCat("a replicated parameter has one shard per rank: ", shards->size(),
                                  " listed, world_size is ", world_size));
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      specs::ParameterLayout layout,
      At(ChildPath(path, "spec"),
         specs::LayOutParameter(parameter.spec, parameter.shape, world_size)));
  if (Dump(*spec) != layout.canonical_json) {
    return PathError(ChildPath(path, "spec"),
                     absl::StrCat("not the bound canonical form ", layout.canonical_json));
  }
  parameter.spec_json = layout.canonical_json;
  SHARDKIT_ASSIGN_OR_RETURN(const Json* fingerprint, Required(value, path, "fingerprint"));
  SHARDKIT_ASSIGN_OR_RETURN(parameter.fingerprint,
                            GetString(*fingerprint, ChildPath(path, "fingerprint")));
  if (parameter.fingerprint != layout.fingerprint) {
    return PathError(ChildPath(path, "fingerprint"),
                     absl::StrCat("does not match the spec (", layout.fingerprint, ")"));
  }
  parameter.shards.reserve(shards->size());
  for (size_t i = 0; i < shards->size(); ++i) {
    // Read without its path first (no string built per shard), again with it for the message.
    absl::StatusOr<IndexShard> shard = ParseShard((*shards)[i], "");
    if (!shard.ok()) shard = ParseShard((*shards)[i], IndexPath(ChildPath(path, "shards"), i));
    if (!shard.ok()) return shard.status();
    parameter.shards.push_back(*std::move(shard));
  }
  SHARDKIT_RETURN_IF_ERROR(CheckShardsMatchLayout(parameter, layout, path));
  return parameter;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const Json& value) {
  if (!value.is_object()) return TypeError("metadata", "object", value);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, entry] : value.items()) {
    SHARDKIT_ASSIGN_OR_RETURN(metadata[key], GetString(entry, ChildPath("metadata", key)));
  }
  return metadata;
}

absl::StatusOr<ShardIndex> ParseIndexJson(const Json& json) {
  SHARDKIT_RETURN_IF_ERROR(CheckObject(
      json, "",
      {"format", "version", "world_size", "src_rank", "strategy", "metadata", "parameters"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* format, Required(json, "", "format"));
  if (*format != kIndexFormat) {
    return PathError("format", absl::StrCat("expected ", QuoteName(kIndexFormat), ", got ",
                                            DescribeValue(*format)));
  }
  SHARDKIT_ASSIGN_OR_RETURN(const Json* version, Required(json, "", "version"));
  SHARDKIT_ASSIGN_OR_RETURN(const int64_t version_number, GetInt(*version, "version"));
  if (version_number != 1) {
    return PathError("version", absl::StrCat("expected 1, got ", version_number));
  }
  ShardIndex index;
  SHARDKIT_ASSIGN_OR_RETURN(const Json* world, Required(json, "", "world_size"));
  SHARDKIT_ASSIGN_OR_RETURN(index.world_size, GetInt(*world, "world_size"));
  SHARDKIT_RETURN_IF_ERROR(AtPath("world_size", specs::ValidateWorldSize(index.world_size)));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* src, Required(json, "", "src_rank"));
  SHARDKIT_ASSIGN_OR_RETURN(index.src_rank, GetInt(*src, "src_rank"));
  if (index.src_rank < 0 || index.src_rank >= index.world_size) {
    return PathError("src_rank", "outside the world");
  }
  SHARDKIT_ASSIGN_OR_RETURN(const Json* strategy, Required(json, "", "strategy"));
  SHARDKIT_ASSIGN_OR_RETURN(std::string strategy_name, GetString(*strategy, "strategy"));
  SHARDKIT_ASSIGN_OR_RETURN(index.written_by, At("strategy", ParseWrittenBy(strategy_name)));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* metadata, Required(json, "", "metadata"));
  SHARDKIT_ASSIGN_OR_RETURN(index.metadata, ParseMetadata(*metadata));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* parameters, Required(json, "", "parameters"));
  if (!parameters->is_object()) return TypeError("parameters", "object", *parameters);
  for (const auto& [name, value] : parameters->items()) {  // sorted by name
    SHARDKIT_ASSIGN_OR_RETURN(IndexParameter parameter,
                              ParseParameter(name, value, index.world_size,
                                             absl::StrFormat("parameters[%s]", Dump(name))));
    index.parameters.push_back(std::move(parameter));
  }
  return index;
}

}  // namespace

std::string RankFileName(int64_t rank) { return absl::StrFormat("rank-%05d.safetensors", rank); }

int64_t RankOfFileName(std::string_view name) {
  if (name.size() < kRankPrefix.size() + 5 + kRankSuffix.size() ||
      name.substr(0, kRankPrefix.size()) != kRankPrefix ||
      name.substr(name.size() - kRankSuffix.size()) != kRankSuffix) {
    return -1;
  }
  std::string_view digits =
      name.substr(kRankPrefix.size(), name.size() - kRankPrefix.size() - kRankSuffix.size());
  int64_t rank = -1;
  if (!AllDigits(digits) ||
      !absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &rank)) {
    return -1;
  }
  return rank;
}

std::vector<std::string> ShardTensorNames(std::string_view name,
                                          const std::vector<specs::ShardMetadata>& shards) {
  absl::flat_hash_map<int64_t, int64_t> held;  // rank -> shards it holds
  for (const specs::ShardMetadata& shard : shards) ++held[shard.placement.rank()];
  std::vector<std::string> names;
  names.reserve(shards.size());
  const absl::string_view base(name.data(), name.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    names.push_back(held[shards[i].placement.rank()] < 2 ? std::string(base)
                                                         : absl::StrCat(base, "#", i));
  }
  return names;
}

absl::Status CheckNoShardSuffix(std::string_view name) {
  if (name.find('#') == std::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("parameter ", QuoteName(name),
                   ": names must not contain '#' (shard files name shards NAME#K)"));
}

absl::Status CheckOutsideInput(const std::string& in_dir, const std::string& out_dir) {
  auto normal = [](const std::string& path) {
    std::error_code ec;
    std::string text = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    return text;
  };
  const std::string in = normal(in_dir), out = normal(out_dir);
  if (out != in && !absl::StartsWith(out, in == "/" ? in : in + "/")) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the output directory ", out_dir, in == out ? " is " : " is inside ",
      "the shard directory it would be read from (", in_dir, "): pick a directory outside it"));
}

IndexParameter MakeIndexParameter(std::string name, DType dtype, Shape shape,
                                  const specs::ParameterLayout& layout) {
  IndexParameter parameter{
      std::move(name),    dtype, std::move(shape), layout.spec, layout.canonical_json,
      layout.fingerprint, {}};
  const std::vector<std::string> tensors = ShardTensorNames(parameter.name, layout.shards);
  for (size_t i = 0; i < layout.shards.size(); ++i) {
    const specs::ShardMetadata& shard = layout.shards[i];
    parameter.shards.push_back(
        {{shard.offsets, shard.sizes, specs::Placement::ForRank(shard.placement.rank())},
         RankFileName(shard.placement.rank()),
         tensors[i]});
  }
  return parameter;
}

WrittenBy WrittenByShard(specs::Strategy strategy) {
  switch (strategy) {
    case specs::Strategy::kBroadcast:
      return WrittenBy::kShardBroadcast;
    case specs::Strategy::kDirect:
      return WrittenBy::kShardDirect;
    case specs::Strategy::kScatter:
      break;
  }
  return WrittenBy::kShardScatter;
}

std::string_view WrittenByName(WrittenBy written_by) {
  switch (written_by) {
    case WrittenBy::kShardBroadcast:
      return "broadcast";
    case WrittenBy::kShardDirect:
      return "direct";
    case WrittenBy::kReshard:
      return "reshard";
    case WrittenBy::kSave:
      return "save";
    case WrittenBy::kShardScatter:
      break;
  }
  return "scatter";
}

absl::StatusOr<WrittenBy> ParseWrittenBy(std::string_view name) {
  for (WrittenBy w : {WrittenBy::kShardScatter, WrittenBy::kShardBroadcast, WrittenBy::kShardDirect,
                      WrittenBy::kReshard, WrittenBy::kSave}) {
    if (name == WrittenByName(w)) return w;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("expected \"scatter\", \"broadcast\", \"direct\", \"reshard\" or \"save\", got ",
                   json::DescribeValue(json::Json(std::string(name)))));
}

std::string IndexToJson(const ShardIndex& index) {
  OrderedJson head = {{"format", kIndexFormat},
                      {"version", 1},
                      {"world_size", index.world_size},
                      {"src_rank", index.src_rank},
                      {"strategy", WrittenByName(index.written_by)},
                      {"metadata", index.metadata}};
  std::string text = head.dump();
  text.pop_back();  // the closing brace: parameters follow, one per line
  text += ",\n \"parameters\": {";
  for (size_t i = 0; i < index.parameters.size(); ++i) {
    const IndexParameter& parameter = index.parameters[i];
    absl::StrAppend(&text, i == 0 ? "\n  " : ",\n  ", OrderedJson(parameter.name).dump(), ": ",
                    ParameterToJson(parameter).dump());
  }
  text += "}}\n";
  return text;
}

absl::StatusOr<ShardIndex> ParseIndex(std::string_view text, std::string_view source) {
  const std::string where(source);
  absl::StatusOr<Json> json = json::ParseJson(text);
  if (!json.ok()) return Annotate(json.status(), where);
  absl::StatusOr<ShardIndex> index = ParseIndexJson(*json);
  if (!index.ok()) return Annotate(index.status(), where);
  return index;
}

absl::StatusOr<ShardIndex> ReadIndex(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexFileName).string();
  absl::StatusOr<std::string> text = os::ReadWholeFile(path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat(
        path, ": no such file (not a shard directory, or the run that wrote it failed)"));
  }
  if (!text.ok()) return text.status();
  return ParseIndex(*text, path);
}

absl::Status WriteIndex(const std::string& dir, const ShardIndex& index) {
  return os::WriteFileAtomically((fs::path(dir) / kIndexFileName).string(), IndexToJson(index));
}

}  // namespace shardkit::shard_dir
