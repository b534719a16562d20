#include "integration/formats/safetensors/output_files.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/status_macros.h"

namespace shardkit::safetensors {

absl::StatusOr<std::vector<OutputFile>> PlanOutputFiles(
    const std::vector<TensorInfo>& tensors, const std::vector<size_t>& file_of,
    const std::vector<std::string>& paths, const std::map<std::string, std::string>& metadata,
    std::vector<TensorInfo>* placed) {
  std::vector<std::vector<TensorInfo>> groups(paths.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    groups[file_of[i]].push_back({tensors[i].name, tensors[i].dtype, tensors[i].shape, 0, 0});
  }
  std::vector<OutputFile> files;
  uint64_t begin = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    SHARDKIT_ASSIGN_OR_RETURN(safetensors::FileLayout layout,
                              safetensors::PlanFile(paths[f], std::move(groups[f]), metadata));
    files.push_back({paths[f], std::move(layout), begin});
    begin = files.back().end();
  }
  // PlanFile lays a file's tensors out in name order, the order they came in.
  std::vector<size_t> taken(files.size(), 0);
  placed->clear();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OutputFile& file = files[file_of[i]];
    TensorInfo info = file.layout.tensors[taken[file_of[i]]++];
    SHARDKIT_CHECK(info.name == tensors[i].name) << "tensors not in name order: " << info.name;
    info.begin += file.begin;
    info.end += file.begin;
    placed->push_back(std::move(info));
  }
  return files;
}

absl::Status OutputFiles::Open() {
  if (next_ == 0 && !files_.empty()) return OpenNext();
  return absl::OkStatus();
}

absl::Status OutputFiles::CommitOldest(size_t keep) {
  while (complete_.size() > keep) {
    absl::Status status = complete_.front().Commit();
    complete_.pop_front();
    SHARDKIT_RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

absl::Status OutputFiles::CompleteOpen() {
  if (!open_) return absl::OkStatus();
  complete_.push_back(*std::move(open_));
  open_.reset();
  return CommitOldest(kMaxUncommittedFiles);
}

absl::Status OutputFiles::OpenNext() {
  SHARDKIT_RETURN_IF_ERROR(CompleteOpen());
  SHARDKIT_CHECK(next_ < files_.size()) << "no file after " << next_;
  const OutputFile& file = files_[next_++];
  SHARDKIT_ASSIGN_OR_RETURN(os::AtomicFile created, os::AtomicFile::Create(file.path));
  SHARDKIT_RETURN_IF_ERROR(created.Write(file.layout.prefix.data(), file.layout.prefix.size()));
  SHARDKIT_RETURN_IF_ERROR(created.Resize(file.layout.prefix.size() + file.layout.data_size));
  open_.emplace(std::move(created));
  return absl::OkStatus();
}

template <typename Part>
absl::Status OutputFiles::ForEachPart(uint64_t offset, uint64_t size, Part part) {
  if (offset != written_) {
    return absl::FailedPreconditionError(absl::StrCat("output files: a write at virtual byte ",
                                                      offset, " where the last one ended at ",
                                                      written_, " (their bytes come in order)"));
  }
  uint64_t done = 0;
  while (done < size) {
    // Reach the file holding byte `offset` (files without data on the way are completed empty).
    while (!open_ || files_[next_ - 1].end() <= offset) SHARDKIT_RETURN_IF_ERROR(OpenNext());
    const OutputFile& file = files_[next_ - 1];
    const uint64_t n = std::min<uint64_t>(size - done, file.end() - offset);
    const uint64_t at = file.layout.prefix.size() + (offset - file.begin);
    SHARDKIT_RETURN_IF_ERROR(part(*open_, at, done, n));
    open_->StartWriteback(at, n);
    offset += n;
    done += n;
    written_ = offset;
    if (offset == file.end()) SHARDKIT_RETURN_IF_ERROR(CompleteOpen());
  }
  return absl::OkStatus();
}

absl::Status OutputFiles::WriteAt(uint64_t offset, const void* data, size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  return ForEachPart(offset, size,
                     [&](os::AtomicFile& file, uint64_t at, uint64_t done, uint64_t n) {
                       return file.WriteAt(at, bytes + done, static_cast<size_t>(n));
                     });
}

absl::Status OutputFiles::CopyFrom(int in, const std::string& in_name, uint64_t in_offset,
                                   uint64_t offset, size_t size) {
  return ForEachPart(
      offset, size, [&](os::AtomicFile& file, uint64_t at, uint64_t done, uint64_t n) {
        return file.CopyFrom(in, in_name, in_offset + done, at, static_cast<size_t>(n));
      });
}

absl::Status OutputFiles::Commit() {
  while (next_ < files_.size()) SHARDKIT_RETURN_IF_ERROR(OpenNext());
  SHARDKIT_RETURN_IF_ERROR(CompleteOpen());
  return CommitOldest(0);
}

void OutputFiles::RemoveCommitted() {
  open_.reset();  // an uncommitted AtomicFile removes its temporary file
  complete_.clear();
  std::set<std::string> dirs;
  for (size_t f = 0; f < next_; ++f) {
    std::error_code ec;
    std::filesystem::remove(files_[f].path, ec);
    dirs.insert(std::filesystem::path(files_[f].path).parent_path().string());
  }
  for (const std::string& dir : dirs) {
    (void)os::SyncDirectory(dir.empty() ? "." : dir);  // best effort: the run failed already
  }
  next_ = 0;
  written_ = 0;
}

}  // namespace shardkit::safetensors
