// Small file helpers shared by the CLI commands and the checkpoint formats: reading a whole
// (small) file, and writing a file atomically and durably — under a temporary name in the same
// directory, synced to disk and renamed into place only when complete, so that readers never see a
// partial file, not even after a crash or power loss. A temporary file is registered with the
// interrupt cleanup (interrupt.h) for as long as it exists, so SIGINT/SIGTERM remove it too; one
// a killed process left behind is removed by a later run (RemoveDeadTemporaries). Output
// directories a run creates are tracked (CreatedDirectories), to be removed again if the run
// fails or is interrupted before it wrote anything into them.
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
//
//   SHARDKIT_ASSIGN_OR_RETURN(CreatedDirectories dirs, CreatedDirectories::Make("a/b/out"));
//   if (!status.ok()) dirs.RemoveIfEmpty();  // a failed run: what it created, if still empty
#ifndef SHARDKIT_CORE_OS_FILES_H_
#define SHARDKIT_CORE_OS_FILES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/interrupt.h"

namespace shardkit::os {

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

// The directories one run created for its output (MakeDirectories, remembering which of `dir` and
// its parents did not exist before), so that a run that fails or is interrupted before writing
// anything into them leaves no trace. While it lives, each created directory is registered with
// the interrupt cleanup (removed by the handler if empty, the deepest first), as are the files
// given to AddOwnFile. Movable, not copyable; destroying it keeps everything (Keep).
class CreatedDirectories {
 public:
  CreatedDirectories() = default;
  CreatedDirectories(CreatedDirectories&&) = default;
  CreatedDirectories& operator=(CreatedDirectories&&) = default;

  // Errors: as MakeDirectories; kCancelled once the process is being interrupted.
  [[nodiscard]] static absl::StatusOr<CreatedDirectories> Make(const std::string& dir);

  // Whether `dir` itself was created by Make (its created parents with it).
  bool created() const { return created_; }

  // A file of this run's inside `dir` that does not count as writing into it — the lock file, for
  // as long as this run holds the lock: removed before the directories, on interrupt and by
  // RemoveIfEmpty. Ignored unless created().
  void AddOwnFile(const std::string& path);

  // A failed run: removes the own files, then the created directories, deepest first, each only
  // if it is empty (waiting up to kDirectorySettleMs for other ranks' temporary files to go);
  // stops at the first that is not. Returns whether `dir` was removed. Best effort.
  bool RemoveIfEmpty();

  // A run that wrote its output: nothing is removed, on interrupt either.
  void Keep();

 private:
  std::string dir_;                // as given, without trailing slashes
  bool created_ = false;           // `dir_` itself was created
  std::vector<std::string> dirs_;  // created and not kept yet, outermost first
  std::vector<std::string> own_files_;
  std::vector<InterruptCleanup> registrations_;
};

// The temporary name AtomicFile writes `<base>` under: "<base>.tmp.<pid>".
struct TemporaryName {
  std::string_view base;
  int64_t pid = 0;  // 1 .. the largest pid_t
};

// The temporary name this process writes `path` under: "<path>.tmp.<pid>".
std::string TemporaryPath(const std::string& path);

// `name`'s base and pid if it is a temporary name (a pid of decimal digits after the last
// ".tmp."), else nullopt.
std::optional<TemporaryName> ParseTemporaryName(std::string_view name);

// Whether no process `pid` runs on this host: kill(pid, 0) fails with ESRCH, or the process is a
// zombie (killed, not reaped yet: it writes nothing any more). (EPERM: it runs, as another user.)
bool ProcessGone(int64_t pid);

// Removes the temporary files in `dir` (ParseTemporaryName) whose base `is_ours` accepts and
// whose process is gone (ProcessGone): what an interrupted or killed run of the same kind left
// behind. A temporary file of a running process is never touched. The pid is only meaningful on
// this host: callers either hold the directory's lock (no run of their kind writes there but the
// holder) or say what another host's run at the same moment would see (a failed rename, never a
// wrong file). Returns the names removed; `left_alone`, when given, receives the names of those
// left because their process runs, for the caller to say so. Errors: kInvalidArgument naming the
// directory or the file and the OS error.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> RemoveDeadTemporaries(
    const std::string& dir, absl::FunctionRef<bool(std::string_view base)> is_ours,
    std::vector<std::string>* left_alone = nullptr);

// The warning for a temporary file `name` of `dir` that RemoveDeadTemporaries left alone:
// "warning: DIR: left NAME alone: its process PID is running on this host (remove it yourself if
// no shardkit run is writing there)". Precondition: `name` is a temporary name.
std::string LeftAloneWarning(const std::string& dir, const std::string& name);

// A file being written under the temporary name "<path>.tmp.<pid>". Commit() renames it to
// `path`; destroying an uncommitted AtomicFile removes the temporary file, and so does the
// interrupt handler (interrupt.h) while it exists. Movable, not copyable.
// Not thread-safe: make one call at a time. WriteAt calls need not come in offset order, so one
// writer thread may fill the file's ranges as their bytes arrive.
class AtomicFile {
 public:
  // Errors: kInvalidArgument naming the path and the OS error if it cannot be created (a missing
  // directory, a path below a regular file, no permission); kCancelled once the process is being
  // interrupted.
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

  // Writes `size` bytes of file `in` (from byte `in_offset`; `in_name` names it in messages) at
  // byte `offset`, copied inside the kernel (CopyFileRange), or through a 64 KiB buffer where the
  // kernel cannot copy between the two files. Errors: kUnavailable naming the file that failed;
  // kInvalidArgument "IN: file is truncated" if `in` ends first.
  [[nodiscard]] absl::Status CopyFrom(int in, const std::string& in_name, uint64_t in_offset,
                                      uint64_t offset, size_t size);

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
  // rename it checks that path() is still nothing or a regular file (CheckOutputType): a symbolic
  // link, device node, fifo or directory put there while the file was written is left alone.
  // (Between that lstat and rename(2) nothing is checked.) Errors: kUnavailable if fsync or close
  // fails; kInvalidArgument if path() is no longer replaceable or the rename fails — in these cases
  // the temporary file is removed and path() is as it was. kUnavailable if only the directory sync
  // fails: the file is then in place, but may not survive a crash.
  [[nodiscard]] absl::Status Commit();

 private:
  AtomicFile(std::string path, std::string temp, int fd, InterruptCleanup registration);
  void Discard();

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  InterruptCleanup registration_;  // the temporary file, until renamed or removed
};

// What may stand at a path a file is about to be written to: nothing, or a regular file — not a
// symbolic link (not even one to a regular file), a directory, a device node, a fifo or a socket
// (one lstat, a final symbolic link not followed). AtomicFile::Commit calls it just before its
// rename; `name` is how messages name the path ("the output file", "--summary").
// Errors: kInvalidArgument "NAME OUT is a symbolic link: …" / "exists and is a directory, not a
// regular file: …", or the OS error (other than "no such file") of lstat.
[[nodiscard]] absl::Status CheckOutputType(const std::string& out,
                                           const std::string& name = "the output file");

// What a file of mode `mode` (st_mode) is, for messages: "a symbolic link", "a directory",
// "a character device", "a block device", "a fifo", "a socket", else "not a regular file".
std::string FileTypeText(unsigned int mode);

// Creates or replaces `path` with `contents` atomically and durably. Errors: as AtomicFile.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_FILES_H_
