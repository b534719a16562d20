#include "integration/formats/hf/hf_writer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "core/tensor/shape.h"
#include "integration/formats/safetensors/output_files.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::hf {
namespace {

namespace fs = std::filesystem;
using formats::OutputContent;
using formats::OutputTensors;

// The checkpoint's files: which tensor goes to which (AssignFiles), their names, and every
// tensor's data bytes, in the content's order.
struct Files {
  FileAssignment assignment;
  std::vector<std::string> names;
  std::vector<int64_t> bytes;
};

absl::StatusOr<Files> AssignFilesOf(const OutputTensors& tensors, int64_t max_file_bytes) {
  Files files;
  for (size_t t = 0; t < tensors.size(); ++t) {
    absl::StatusOr<ShapeSize> size = ComputeShapeSize(tensors[t].shape, tensors[t].dtype);
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteName(tensors[t].name), ": ", size.status().message()));
    }
    files.bytes.push_back(size->nbytes);
  }
  files.assignment = AssignFiles(files.bytes, max_file_bytes);
  files.names = HfFileNames(files.assignment.files);
  return files;
}

// What a Hugging Face checkpoint can be: one process's, of whole tensors, planned in name order.
absl::Status CheckWritable(const OutputContent& content, int rank) {
  if (content.world_size != 1 || rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a Hugging Face checkpoint is written by one process, not by rank ", rank,
                     " of ", content.world_size));
  }
  const OutputTensors& tensors = content.tensors;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (!tensors[t].replicated) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteName(tensors[t].name),
                       " is sharded: a Hugging Face checkpoint holds whole tensors"));
    }
    if (t > 0 && !(tensors[t - 1].name < tensors[t].name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensors ", QuoteName(tensors[t - 1].name), " and ", QuoteName(tensors[t].name),
          " are not in name order: a Hugging Face checkpoint's files are planned in name order"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool HfOutput::IsOutputFile(std::string_view name) const { return IsHfOutputName(name); }

absl::StatusOr<bool> HfOutput::Examine(const std::string& dir,
                                       const std::vector<std::string>& names) const {
  if (names.empty()) return false;
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  return absl::InvalidArgumentError(absl::StrCat(
      dir, ": holds the files of a Hugging Face checkpoint (", JoinFirst(sorted, 3),
      "): a Hugging Face output is written into an empty directory, never over an earlier one"));
}

std::vector<std::string> HfOutput::RankFileNames(int rank, const OutputContent& content) const {
  absl::StatusOr<Files> files = AssignFilesOf(content.tensors, max_file_bytes_);
  return files.ok() ? files->names : std::vector<std::string>{kHfSingleFileName};
}

absl::Status HfOutput::CreateRankFile(const std::string& dir, int rank,
                                      const OutputContent& content, formats::RankFile& file) const {
  SHARDKIT_RETURN_IF_ERROR(CheckWritable(content, rank));
  SHARDKIT_ASSIGN_OR_RETURN(const Files files, AssignFilesOf(content.tensors, max_file_bytes_));
  std::vector<safetensors::TensorInfo> infos;
  for (size_t t = 0; t < content.tensors.size(); ++t) {
    infos.push_back(
        {content.tensors[t].name, content.tensors[t].dtype, content.tensors[t].shape, 0, 0});
  }
  std::vector<std::string> paths;
  for (const std::string& name : files.names) paths.push_back((fs::path(dir) / name).string());
  static const auto* const kNoMetadata = new std::map<std::string, std::string>;
  std::vector<safetensors::TensorInfo> placed;
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<safetensors::OutputFile> planned,
      safetensors::PlanOutputFiles(infos, files.assignment.file_of, paths,
                                   content.metadata != nullptr ? *content.metadata : *kNoMetadata,
                                   &placed));
  auto sink = std::make_unique<safetensors::OutputFiles>(std::move(planned));
  SHARDKIT_RETURN_IF_ERROR(sink->Open());
  file.dest.clear();
  for (const safetensors::TensorInfo& info : placed) {
    file.dest.push_back({static_cast<int64_t>(info.begin)});
  }
  file.data_start = 0;
  file.sink = std::move(sink);
  return absl::OkStatus();
}

std::vector<int64_t> HfOutput::RankFileTensors(const OutputContent& content) const {
  return {static_cast<int64_t>(content.tensors.size())};
}

absl::Status HfOutput::WriteLastFile(const std::string& dir, const OutputContent& content) const {
  SHARDKIT_ASSIGN_OR_RETURN(const Files files, AssignFilesOf(content.tensors, max_file_bytes_));
  if (files.names.size() <= 1) return absl::OkStatus();
  std::map<std::string, std::string> weight_map;
  int64_t total = 0;
  for (size_t t = 0; t < content.tensors.size(); ++t) {
    weight_map[content.tensors[t].name] = files.names[files.assignment.file_of[t]];
    total += files.bytes[t];
  }
  return os::WriteFileAtomically((fs::path(dir) / kHfIndexFileName).string(),
                                 HfIndexJson(total, weight_map));
}

}  // namespace shardkit::hf
