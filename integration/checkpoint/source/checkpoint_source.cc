#include "integration/checkpoint/source/checkpoint_source.h"

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
#include "core/os/files.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/hf_sharded_source.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/hf/hf_index.h"
#include "integration/formats/hf/hf_output.h"
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
  absl::StatusOr<std::string> text = os::ReadWholeFile((fs::path(dir) / kIndexFileName).string());
  if (!text.ok()) return false;
  absl::StatusOr<Json> json = json::ParseJson(*text);
  return json.ok() && json->is_object() && json->contains("format") &&
         (*json)["format"] == kIndexFormat;
}

absl::StatusOr<CheckpointPath> ResolveDirectory(const std::string& dir) {
  if (IsShardDirectory(dir)) return CheckpointPath{CheckpointKind::kShardDirectory, dir};
  if (dcp::IsDcpDirectory(dir) || HfShardedSource::Holds(dir)) {
    return CheckpointPath{CheckpointKind::kDcpDirectory, dir};
  }
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
      indexes.empty() && files.size() == 1 && hf::IsNumberedPartName(files[0], &parts)) {
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
    absl::StatusOr<hf::HfIndex> map = hf::ReadHfIndex((dir / index).string());
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
  if (where.kind == CheckpointKind::kDcpDirectory) {
    return Invalid(where.path,
                   "is a PyTorch DCP checkpoint, not a safetensors one: use 'shardkit reshard "
                   "--in DIR' to lay it out as shards, or 'shardkit gather' to write it as "
                   "safetensors");
  }
  std::vector<safetensors::Reader> files;
  if (where.kind == CheckpointKind::kSafetensors) {
    SHARDKIT_ASSIGN_OR_RETURN(safetensors::Reader file, safetensors::Reader::Open(where.path));
    files.push_back(std::move(file));
    WarnIfPartOfIndex(where.path, warnings);
    return FromFiles(std::move(files), {fs::path(where.path).filename().string()}, where.path);
  }
  SHARDKIT_ASSIGN_OR_RETURN(hf::HfIndex map, hf::ReadHfIndex(where.path));
  std::vector<std::string> names, paths;
  SHARDKIT_ASSIGN_OR_RETURN(files, hf::OpenHfIndexFiles(where.path, map, names, paths));
  SHARDKIT_RETURN_IF_ERROR(hf::CheckHfIndex(where.path, map, names, files));
  hf::WarnAboutHfTotalSize(where.path, map, paths, files, warnings);
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source,
                            FromFiles(std::move(files), names, where.path));
  source.identity_.insert(
      source.identity_.begin(),
      CheckpointFile{fs::path(where.path).filename().string(), map.bytes, map.digest, true});
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

std::optional<TensorSource::FileRange> CheckpointSource::FileRangeOf(size_t t, int64_t offset,
                                                                     int64_t size) const {
  const safetensors::Reader& reader = file(t);
  return FileRange{reader.fd(), &reader.path(),
                   reader.header().data_start + info(t).begin + static_cast<uint64_t>(offset)};
}

}  // namespace shardkit::checkpoint
