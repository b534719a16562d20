// Small file helpers shared by the CLI commands and the checkpoint formats: reading a whole
// (small) file, and writing a file atomically and durably — under a temporary name in the same
// directory, synced to disk and renamed into place only when complete, so that readers never see a
// partial file, not even after a crash or power loss.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::string plan_text, ReadWholeFile("plan.json"));
//   SHARDKIT_RETURN_IF_ERROR(WriteFileAtomically("out/index.json", text));
//
//   SHARDKIT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create("out/big.bin"));
//   SHARDKIT_RETURN_IF_ERROR(file.Write(data, size));  // as many times as needed
//   SHARDKIT_RETURN_IF_ERROR(file.Commit());            // without it, nothing appears
//
//   SHARDKIT_RETURN_IF_ERROR(file.Resize(total));        // or fill ranges in any order:
//   SHARDKIT_RETURN_IF_ERROR(file.WriteAt(offset, data, size));
#ifndef SHARDKIT_INTEGRATION_IO_FILES_H_
#define SHARDKIT_INTEGRATION_IO_FILES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::io {

// The file's bytes. Meant for small files (plans, index.json).
// Errors: kNotFound if it does not exist; kInvalidArgument if it cannot be read (naming the path
// and the OS error, e.g. a directory).
[[nodiscard]] absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Makes the entries of directory `dir` (created, renamed, removed files) durable: fsync on the
// directory. A file system that cannot sync directories (EINVAL) counts as success.
// Errors: kUnavailable naming `dir` and the OS error (e.g. it does not exist).
[[nodiscard]] absl::Status SyncDirectory(const std::string& dir);

// Creates directory `dir`, and its missing parents, unless it exists. Errors: kInvalidArgument
// naming `dir` and the OS error if it cannot be examined or created (a path below a regular file,
// no permission), or if it exists and is not a directory.
[[nodiscard]] absl::Status MakeDirectories(const std::string& dir);

// A file being written under the temporary name "<path>.tmp.<pid>". Commit() renames it to
// `path`; destroying an uncommitted AtomicFile removes the temporary file. Movable, not copyable.
// Not thread-safe: make one call at a time. WriteAt calls need not come in offset order, so one
// writer thread may fill the file's ranges as their bytes arrive.
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

  // Appends `size` bytes at the file position. Errors: kUnavailable on I/O errors (disk full, ...).
  [[nodiscard]] absl::Status Write(const void* data, size_t size);

  // Writes `size` bytes at byte `offset`, extending the file if needed (a gap reads as zeros). Does
  // not move the position Write appends at. Errors: kUnavailable naming the temporary file and the
  // OS error (disk full, an offset the file system cannot hold, ...).
  [[nodiscard]] absl::Status WriteAt(uint64_t offset, const void* data, size_t size);

  // Sets the file's size to `size` bytes: truncates, or extends with zeros. Call it with the final
  // size, before or after WriteAt. Errors: kUnavailable naming the temporary file and the OS error.
  [[nodiscard]] absl::Status Resize(uint64_t size);

  // Asks the kernel to start writing bytes [offset, offset + size) to disk now, without waiting
  // (sync_file_range SYNC_FILE_RANGE_WRITE), so that a long write's Commit has less left to
  // flush: the disk works while the data is still arriving. Advice only: never fails, and
  // Commit's fsync is what makes the file durable.
  void StartWriteback(uint64_t offset, uint64_t size);

  // Makes the file durable and puts it in place: fsync, close, rename to path(), then fsync of the
  // parent directory (SyncDirectory) so that the new name survives a crash too. Just before the
  // rename it checks that path() is still nothing or a regular file (CheckOutputType,
  // output_file.h): a symbolic link, device node, fifo or directory put there while the file was
  // written is left alone. (Between that lstat and rename(2) nothing is checked.)
  // Errors: kUnavailable if fsync or close fails; kInvalidArgument if path() is no longer
  // replaceable or the rename fails — in these cases the temporary file is removed and path() is
  // as it was. kUnavailable if only the directory sync fails: the file is then in place, but may
  // not survive a crash.
  [[nodiscard]] absl::Status Commit();

 private:
  AtomicFile(std::string path, std::string temp, int fd);
  void Discard();

  std::string path_;
  std::string temp_;
  int fd_ = -1;
};

// Creates or replaces `path` with `contents` atomically and durably. Errors: as AtomicFile.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace shardkit::io

#endif  // SHARDKIT_INTEGRATION_IO_FILES_H_
