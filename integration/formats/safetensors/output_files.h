// OutputFiles: safetensors files written as one stream of bytes — the one checkpoint file
// `shardkit gather` writes, or the files of a Hugging Face checkpoint (formats/hf/hf_writer.h:
// the sink of its one rank, a formats::RankSink whose writes come in order). Their data regions,
// in file order, make one virtual data region; the gather pipeline fills windows of it and hands
// them to WriteAt, which puts every byte at its final offset in its file. Each file is created (an
// os::AtomicFile: header written, sized to its final length) when the stream reaches it, and
// committed (fsync, rename, directory fsync) in file order: once kMaxUncommittedFiles later files
// are complete, or else in Commit. Committing each file as soon as it is complete would stall the
// stream at every file boundary — the writer waiting in fsync while the disk drains, then the disk
// idle while the next window is copied — where a file committed later was written back long before,
// so its fsync is short and the disk never stops. At most kMaxUncommittedFiles + 1 files are open.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<OutputFile> files,
//                             PlanOutputFiles(infos, file_of, paths, metadata, &placed));
//   OutputFiles out(std::move(files));
//   SHARDKIT_RETURN_IF_ERROR(out.Open());                      // the first file, before any read
//   SHARDKIT_RETURN_IF_ERROR(out.WriteAt(offset, data, size)); // virtual bytes, in order
//   SHARDKIT_RETURN_IF_ERROR(out.Commit());                    // files with no bytes left
//
// Not thread-safe: one thread at a time (the pipeline's writer thread, then the caller).
#ifndef SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_OUTPUT_FILES_H_
#define SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_OUTPUT_FILES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/files.h"
#include "integration/formats/output_file/rank_sink.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::safetensors {

// Complete files kept open, uncommitted, while the next ones are written.
inline constexpr size_t kMaxUncommittedFiles = 16;

struct OutputFile {
  std::string path;
  safetensors::FileLayout layout;  // its tensors (offsets in its own data region) and prefix
  uint64_t begin = 0;              // its data is virtual bytes [begin, end())
  uint64_t end() const { return begin + layout.data_size; }
};

// Lays out `tensors` (name order; only name, dtype and shape are used) over the files `paths`:
// tensor i goes to file file_of[i], every file gets `metadata`, and each file's data follows the
// previous file's in the virtual region. `placed` receives the tensors again, in the same order,
// with their virtual offsets. Errors: as safetensors::PlanFile (naming the file).
[[nodiscard]] absl::StatusOr<std::vector<OutputFile>> PlanOutputFiles(
    const std::vector<safetensors::TensorInfo>& tensors, const std::vector<size_t>& file_of,
    const std::vector<std::string>& paths, const std::map<std::string, std::string>& metadata,
    std::vector<safetensors::TensorInfo>* placed);

class OutputFiles final : public formats::RankSink {
 public:
  explicit OutputFiles(std::vector<OutputFile> files) : files_(std::move(files)) {}
  OutputFiles(OutputFiles&&) = default;
  OutputFiles& operator=(OutputFiles&&) = default;

  const std::vector<OutputFile>& files() const { return files_; }
  uint64_t total_bytes() const { return files_.empty() ? 0 : files_.back().end(); }

  // Creates the first file, so that an output that cannot be written fails before any input is
  // read. Errors: as os::AtomicFile::Create, Write and Resize.
  [[nodiscard]] absl::Status Open();

  bool writes_in_order() const override { return true; }

  // Writes virtual bytes [offset, offset + size): each call starts where the last one ended.
  // Creates the files the bytes reach; commits the oldest complete files beyond
  // kMaxUncommittedFiles. Errors: as os::AtomicFile (Create, WriteAt, Commit); kFailedPrecondition
  // naming both offsets for a write that does not start where the last one ended.
  [[nodiscard]] absl::Status WriteAt(uint64_t offset, const void* data, size_t size) override;

  // The same bytes copied from file `in` (os::AtomicFile::CopyFrom, file by file).
  [[nodiscard]] absl::Status CopyFrom(int in, const std::string& in_name, uint64_t in_offset,
                                      uint64_t offset, size_t size) override;

  // Creates the files not created yet (those with no data after the last write) and commits
  // every file, in file order. Call once every byte is written. Errors: as os::AtomicFile.
  [[nodiscard]] absl::Status Commit() override;

  // A failed run cleaning up after itself: removes the temporary files of the files not
  // committed and every path of the files created so far, then syncs their directories. Best
  // effort. Only for paths that did not exist before this run (files written into an empty
  // directory).
  void RemoveCommitted() override;

 private:
  // Completes the open file, if any, and creates the next one.
  absl::Status OpenNext();
  // Moves the open file, if any, to complete_, committing the oldest beyond the limit.
  absl::Status CompleteOpen();
  // Commits the oldest complete files until `keep` are left.
  absl::Status CommitOldest(size_t keep);
  // Virtual bytes [offset, offset + size), file by file: `part(file, at, done, n)` for each file's
  // n bytes at its byte `at`, `done` bytes into the range. In order, as WriteAt.
  template <typename Part>
  absl::Status ForEachPart(uint64_t offset, uint64_t size, Part part);

  std::vector<OutputFile> files_;
  std::optional<os::AtomicFile> open_;   // files_[next_ - 1] while it is being written
  std::deque<os::AtomicFile> complete_;  // written, not committed yet, oldest first
  size_t next_ = 0;                      // the next file to create
  uint64_t written_ = 0;                 // where the next write starts
};

}  // namespace shardkit::safetensors

#endif  // SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_OUTPUT_FILES_H_
