// Small file helpers shared by the CLI commands and the checkpoint formats: reading a whole
// (small) file, and writing a file atomically — under a temporary name in the same directory,
// renamed into place only when complete, so that readers never see a partial file.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::string plan_text, ReadWholeFile("plan.json"));
//   SHARDKIT_RETURN_IF_ERROR(WriteFileAtomically("out/index.json", text));
//
//   SHARDKIT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create("out/big.bin"));
//   SHARDKIT_RETURN_IF_ERROR(file.Write(data, size));  // as many times as needed
//   SHARDKIT_RETURN_IF_ERROR(file.Commit());            // without it, nothing appears
#ifndef SHARDKIT_INTEGRATION_IO_FILES_H_
#define SHARDKIT_INTEGRATION_IO_FILES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::io {

// The file's bytes. Meant for small files (plans, index.json).
// Errors: kNotFound if it does not exist; kInvalidArgument if it cannot be read (naming the path
// and the OS error, e.g. a directory).
[[nodiscard]] absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// A file being written under the temporary name "<path>.tmp.<pid>". Commit() renames it to
// `path`; destroying an uncommitted AtomicFile removes the temporary file. Movable, not copyable;
// not thread-safe.
class AtomicFile {
 public:
  // Errors: kInvalidArgument naming the path and the OS error if it cannot be created (a missing
  // directory, a path below a regular file, no permission).
  [[nodiscard]] static absl::StatusOr<AtomicFile> Create(const std::string& path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  const std::string& path() const { return path_; }

  // Appends `size` bytes. Errors: kUnavailable on I/O errors (disk full, ...).
  [[nodiscard]] absl::Status Write(const void* data, size_t size);

  // Closes the file and renames it into place. Errors: kUnavailable if closing fails;
  // kInvalidArgument if the rename fails. Either way the temporary file is gone afterwards.
  [[nodiscard]] absl::Status Commit();

 private:
  AtomicFile(std::string path, std::string temp, int fd);
  void Discard();

  std::string path_;
  std::string temp_;
  int fd_ = -1;
};

// Creates or replaces `path` with `contents` atomically. Errors: as AtomicFile.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace shardkit::io

#endif  // SHARDKIT_INTEGRATION_IO_FILES_H_
