#include "integration/formats/hf/hf_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/json/json_reader.h"
#include "core/os/files.h"
#include "specs/fingerprint.h"

namespace shardkit::hf {
namespace {

namespace fs = std::filesystem;
using json::Json;

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

}  // namespace

absl::StatusOr<HfIndex> ReadHfIndex(const std::string& path) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, os::ReadWholeFile(path));
  absl::StatusOr<Json> parsed = json::ParseJson(text);
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  const Json& index = *parsed;
  if (!index.is_object() || !index.contains("weight_map")) {
    return Invalid(path, "not a Hugging Face index: expected an object with \"weight_map\"");
  }
  HfIndex map;
  map.bytes = text.size();
  map.digest = specs::Fingerprint(text);
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

absl::Status CheckHfIndex(const std::string& index, const HfIndex& map,
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

void WarnAboutHfTotalSize(const std::string& index, const HfIndex& map,
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

absl::StatusOr<std::vector<safetensors::Reader>> OpenHfIndexFiles(const std::string& index,
                                                                  const HfIndex& map,
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

}  // namespace shardkit::hf
