// OpenedFile: a regular file open for reading by range, and the check that it is still the file
// that was opened — what every reader of a checkpoint (safetensors files, DCP's .distcp files)
// holds while a run reads it, so that a file replaced or resized mid-run is an error, never bytes
// of another file.
//
//   SHARDKIT_ASSIGN_OR_RETURN(os::OpenedFile file, os::OpenedFile::Open("ckpt/__0_0.distcp"));
//   SHARDKIT_RETURN_IF_ERROR(file.CheckUnchanged());          // before a round reads it
//   SHARDKIT_RETURN_IF_ERROR(file.Pread(offset, n, buffer));  // exactly n bytes
#ifndef SHARDKIT_CORE_OS_OPENED_FILE_H_
#define SHARDKIT_CORE_OS_OPENED_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/fd.h"

namespace shardkit::os {

class OpenedFile {
 public:
  // Opens `path` read-only and records its size and identity (device, inode).
  // Errors: kNotFound "PATH: no such file"; kInvalidArgument "PATH: cannot open: ..." or
  // "PATH: not a regular file".
  [[nodiscard]] static absl::StatusOr<OpenedFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  uint64_t size() const { return size_; }  // when opened

  // Whether the file is still the one opened: the same size, and the same file at its path (not
  // replaced by another). Errors: kInvalidArgument naming the path and what changed.
  [[nodiscard]] absl::Status CheckUnchanged() const;

  // Reads exactly `size` bytes at byte `offset` into `dst`. Errors: kInvalidArgument
  // "PATH: file is truncated" when the file ends first; kUnavailable "PATH: read failed: ...".
  [[nodiscard]] absl::Status Pread(uint64_t offset, uint64_t size, void* dst) const;

 private:
  std::string path_;
  Fd fd_;
  uint64_t size_ = 0;
  uint64_t device_ = 0, inode_ = 0;
};

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_OPENED_FILE_H_
