#include "integration/checkpoint/checkpoint_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/json/json_reader.h"
#include "integration/checkpoint/hf_output.h"
#include "integration/checkpoint/shard_dir.h"
#include "core/os/files.h"
#include "specs/fingerprint.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using json::Json;

constexpr absl::string_view kIndexSuffix = ".index.json";

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

bool IsShardDirectory(const std::string& dir) {
  absl::StatusOr<std::string> text = io::ReadWholeFile((fs::path(dir) / kIndexFileName).string());
  if (!text.ok()) return false;
  absl::StatusOr<Json> json = json::ParseJson(*text);
  return json.ok() && json->is_object() && json->contains("format") &&
         (*json)["format"] == kIndexFormat;
}

absl::StatusOr<CheckpointPath> ResolveDirectory(const std::string& dir) {
  if (IsShardDirectory(dir)) return CheckpointPath{CheckpointKind::kShardDirectory, dir};
  std::vector<std::string> indexes, files, names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    names.push_back(name);
    if (absl::EndsWith(name, ".safetensors.index.json")) indexes.push_back(name);
    if (absl::EndsWith(name, ".safetensors")) files.push_back(name);
  }
  if (ec) return Invalid(dir, absl::StrCat("cannot list the directory: ", ec.message()));
  std::sort(indexes.begin(), indexes.end());
  std::sort(files.begin(), files.end());
  std::sort(names.begin(), names.end());
  if (indexes.size() == 1) {
    return CheckpointPath{CheckpointKind::kIndex, (fs::path(dir) / indexes[0]).string()};
  }
  if (int64_t parts = 0;
      indexes.empty() && files.size() == 1 && IsNumberedPartName(files[0], &parts)) {
    return Invalid(dir, absl::StrCat("holds only ", files[0], ", one file of a ", parts,
                                     "-file checkpoint, and no *.safetensors.index.json (a write "
                                     "that did not finish?); name the file itself to read it "
                                     "alone"));
  }
  if (indexes.empty() && files.size() == 1) {
    return CheckpointPath{CheckpointKind::kSafetensors, (fs::path(dir) / files[0]).string()};
  }
  const std::string found = names.empty() ? "nothing" : absl::StrJoin(names, ", ");
  if (indexes.size() > 1) {
    return Invalid(dir, absl::StrCat("holds ", indexes.size(),
                                     " Hugging Face indexes (*.safetensors.index.json), expected "
                                     "one: ",
                                     absl::StrJoin(indexes, ", ")));
  }
  return Invalid(dir, absl::StrCat("holds no *.safetensors.index.json and ", files.size(),
                                   " *.safetensors files, expected one of either; found: ", found));
}

// The weight map of a Hugging Face index: tensor -> file (relative to the index), and total_size.
struct WeightMap {
  std::map<std::string, std::string> file_of;
  std::optional<int64_t> total_size;
  CheckpointFile file;  // the index itself
};

absl::StatusOr<WeightMap> ReadWeightMap(const std::string& path) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, io::ReadWholeFile(path));
  absl::StatusOr<Json> parsed = json::ParseJson(text);
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  const Json& index = *parsed;
  if (!index.is_object() || !index.contains("weight_map")) {
    return Invalid(path, "not a Hugging Face index: expected an object with \"weight_map\"");
  }
  WeightMap map;
  map.file = {fs::path(path).filename().string(), text.size(), specs::Fingerprint(text), true};
  const Json& weights = index["weight_map"];
  if (!weights.is_object()) return Invalid(path, "weight_map: expected an object");
  for (const auto& [tensor, file] : weights.items()) {
    if (!file.is_string() || file.get<std::string>().empty()) {
      return Invalid(path,
                     absl::StrCat("weight_map[", QuoteName(tensor), "]: expected a file name"));
    }
    const fs::path name(file.get<std::string>());
    const bool climbs =
        std::any_of(name.begin(), name.end(), [](const fs::path& part) { return part == ".."; });
    if (name.is_absolute() || climbs) {
      return Invalid(path, absl::StrCat("weight_map[", QuoteName(tensor), "]: \"", name.string(),
                                        "\" must be a path relative to the index, inside its "
                                        "directory"));
    }
    map.file_of[tensor] = name.string();
  }
  if (index.contains("metadata") && index["metadata"].is_object() &&
      index["metadata"].contains("total_size") &&
      index["metadata"]["total_size"].is_number_integer()) {
    map.total_size = index["metadata"]["total_size"].get<int64_t>();
  }
  return map;
}

// Every tensor of the map is in the file it names and no other; no file holds one it omits.
absl::Status CheckWeightMap(const std::string& index, const WeightMap& map,
                            const std::vector<std::string>& names,
                            const std::vector<safetensors::Reader>& files) {
  std::map<std::string, std::vector<size_t>> holders;  // tensor -> files holding it
  for (size_t f = 0; f < files.size(); ++f) {
    for (const safetensors::TensorInfo& info : files[f].header().tensors) {
      holders[info.name].push_back(f);
    }
  }
  for (const auto& [tensor, file] : map.file_of) {
    const std::vector<size_t>& in = holders[tensor];
    if (in.size() > 1) {
      return Invalid(index, absl::StrCat("tensor ", QuoteName(tensor), " is in both ", names[in[0]],
                                         " and ", names[in[1]]));
    }
    if (in.empty() || names[in[0]] != file) {
      return Invalid(index,
                     absl::StrCat("weight_map puts tensor ", QuoteName(tensor), " in ", file,
                                  in.empty() ? ", which has no such tensor"
                                             : absl::StrCat(", but it is in ", names[in[0]])));
    }
  }
  for (const auto& [tensor, in] : holders) {
    if (!map.file_of.contains(tensor)) {
      return Invalid(index, absl::StrCat(names[in[0]], " holds tensor \"", tensor,
                                         "\", which the weight_map does not list"));
    }
  }
  return absl::OkStatus();
}

void WarnAboutTotalSize(const std::string& index, const WeightMap& map,
                        const std::vector<std::string>& paths,
                        const std::vector<safetensors::Reader>& files,
                        std::vector<std::string>* warnings) {
  if (!map.total_size) return;
  int64_t tensor_bytes = 0, file_bytes = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    for (const safetensors::TensorInfo& info : files[f].header().tensors) {
      tensor_bytes += static_cast<int64_t>(info.end - info.begin);
    }
    struct stat st {};
    if (::stat(paths[f].c_str(), &st) == 0) file_bytes += st.st_size;
  }
  if (*map.total_size == tensor_bytes || *map.total_size == file_bytes) return;
  warnings->push_back(absl::StrCat("warning: ", index, ": metadata.total_size is ", *map.total_size,
                                   ", but the tensors hold ", tensor_bytes, " bytes and the files ",
                                   file_bytes));
}

absl::StatusOr<std::vector<safetensors::Reader>> OpenIndexFiles(const std::string& index,
                                                                const WeightMap& map,
                                                                std::vector<std::string>& names,
                                                                std::vector<std::string>& paths) {
  std::set<std::string> unique;
  for (const auto& [tensor, file] : map.file_of) unique.insert(file);
  std::vector<safetensors::Reader> files;
  for (const std::string& name : unique) {
    const std::string path = (fs::path(index).parent_path() / name).string();
    absl::StatusOr<safetensors::Reader> reader = safetensors::Reader::Open(path);
    if (!reader.ok()) return Annotate(reader.status(), absl::StrCat("file of ", index));
    names.push_back(name);
    paths.push_back(path);
    files.push_back(*std::move(reader));
  }
  return files;
}

// A file given alone that a Hugging Face index beside it names with other files: only part of
// that checkpoint is read. Indexes that cannot be read are not this file's concern here.
void WarnIfPartOfIndex(const std::string& file, std::vector<std::string>* warnings) {
  const fs::path path(file);
  const std::string name = path.filename().string();
  std::vector<std::string> indexes;
  std::error_code ec;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (absl::EndsWith(entry, ".safetensors.index.json")) indexes.push_back(entry);
  }
  std::sort(indexes.begin(), indexes.end());
  for (const std::string& index : indexes) {
    absl::StatusOr<WeightMap> map = ReadWeightMap((dir / index).string());
    if (!map.ok()) continue;
    std::set<std::string> files;
    for (const auto& [tensor, in] : map->file_of) files.insert(in);
    if (!files.contains(name) || files.size() < 2) continue;
    warnings->push_back(absl::StrCat("warning: ", file, " is one of the ", files.size(),
                                     " files of the checkpoint ", (dir / index).string(),
                                     ": only its own tensors are read; name the index (or the "
                                     "directory) for the whole checkpoint"));
  }
}

}  // namespace

absl::StatusOr<CheckpointPath> ResolveCheckpointPath(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  if (status.type() == fs::file_type::directory) return ResolveDirectory(path);
  if (absl::EndsWith(path, kIndexSuffix)) return CheckpointPath{CheckpointKind::kIndex, path};
  return CheckpointPath{CheckpointKind::kSafetensors, path};
}

absl::StatusOr<CheckpointSource> CheckpointSource::Open(const CheckpointPath& where,
                                                        std::vector<std::string>* warnings) {
  if (where.kind == CheckpointKind::kShardDirectory) {
    return Invalid(where.path,
                   "is a shardkit shard directory, not a checkpoint: use 'shardkit reshard' to "
                   "lay it out anew, or 'shardkit gather' to rebuild the checkpoint");
  }
  std::vector<safetensors::Reader> files;
  if (where.kind == CheckpointKind::kSafetensors) {
    SHARDKIT_ASSIGN_OR_RETURN(safetensors::Reader file, safetensors::Reader::Open(where.path));
    files.push_back(std::move(file));
    WarnIfPartOfIndex(where.path, warnings);
    return FromFiles(std::move(files), {fs::path(where.path).filename().string()}, where.path);
  }
  SHARDKIT_ASSIGN_OR_RETURN(WeightMap map, ReadWeightMap(where.path));
  std::vector<std::string> names, paths;
  SHARDKIT_ASSIGN_OR_RETURN(files, OpenIndexFiles(where.path, map, names, paths));
  SHARDKIT_RETURN_IF_ERROR(CheckWeightMap(where.path, map, names, files));
  WarnAboutTotalSize(where.path, map, paths, files, warnings);
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source,
                            FromFiles(std::move(files), names, where.path));
  source.identity_.insert(source.identity_.begin(), map.file);
  return source;
}

absl::StatusOr<CheckpointSource> CheckpointSource::FromFiles(std::vector<safetensors::Reader> files,
                                                             const std::vector<std::string>& names,
                                                             const std::string& source) {
  CheckpointSource out;
  for (size_t f = 0; f < files.size(); ++f) {
    const safetensors::FileIdentity& id = files[f].identity();
    out.identity_.push_back({names[f], id.size, id.header_digest});
  }
  std::map<std::string, size_t> metadata_from;  // key -> the file that set it
  uint64_t offset = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const safetensors::Header& header = files[f].header();
    for (const auto& [key, value] : header.metadata) {
      auto [it, fresh] = out.header_.metadata.emplace(key, value);
      if (!fresh && it->second != value) {
        return Invalid(source, absl::StrCat("__metadata__ key ", QuoteName(key), " is \"",
                                            it->second, "\" in ", files[metadata_from[key]].path(),
                                            " but \"", value, "\" in ", files[f].path()));
      }
      metadata_from.emplace(key, f);
    }
    for (size_t t = 0; t < header.tensors.size(); ++t) {  // file order
      safetensors::TensorInfo info = header.tensors[t];
      const uint64_t bytes = info.end - info.begin;
      info.begin = offset;
      info.end = offset += bytes;
      out.header_.tensors.push_back(std::move(info));
      out.where_.emplace_back(f, t);
    }
  }
  out.files_ = std::move(files);
  return out;
}

}  // namespace shardkit::checkpoint
