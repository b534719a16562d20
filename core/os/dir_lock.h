// One writer per output directory: an exclusive flock(2) on DIR/.shardkit.lock, held for as long
// as the DirectoryLock lives. A second run into the same directory (another process, or another
// Acquire in this one) fails at once instead of interleaving its files with the first run's. The
// kernel releases the lock when the file is closed — also when the holder dies, even by SIGKILL —
// so a crashed run never leaves the directory locked.
//
// The lock file exists only while a run holds it: the holder removes it, still locked, when it
// lets go, so that a finished output directory holds nothing but the output. Removal opens a race
// that Acquire closes: a run that opened the file just before it was removed may lock it after
// the holder closed it — a file no longer at the path, which locks nothing. So after flock
// succeeds Acquire compares the descriptor's inode with the path's (fstat, stat) and, when they
// differ or the path is gone, closes it and tries again with the file now at the path. A lock
// file left behind (a killed holder, an older shardkit) is taken over and then removed.
//
//   SHARDKIT_ASSIGN_OR_RETURN(DirectoryLock lock, DirectoryLock::Acquire("out"));
//   ...  // write into out/; destroying `lock` removes the lock file and releases the lock
#ifndef SHARDKIT_CORE_OS_DIR_LOCK_H_
#define SHARDKIT_CORE_OS_DIR_LOCK_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/os/interrupt.h"

namespace shardkit::os {

inline constexpr char kLockFileName[] = ".shardkit.lock";

// Holds the lock on a directory. Movable, not copyable; the destructor releases the lock.
class DirectoryLock {
 public:
  // Creates DIR/.shardkit.lock if missing (mode 0644) and locks it without waiting; retries when
  // the file it locked is no longer the one at the path (see above). `dir` must exist.
  // Errors: kInvalidArgument if another holder has the lock ("another shardkit run is writing
  // this directory"), or naming the lock file and the OS error if it cannot be opened or locked
  // (a missing directory, no permission); kUnavailable if the file was replaced under every one
  // of 1000 tries.
  [[nodiscard]] static absl::StatusOr<DirectoryLock> Acquire(const std::string& dir);

  // The same for one output file OUT (a single-file `gather`): the lock file is
  // PARENT/.NAME.shardkit.lock beside it, so that two runs writing OUT at once are told so
  // ("OUT: another shardkit run is writing this file"). OUT's directory must exist.
  [[nodiscard]] static absl::StatusOr<DirectoryLock> AcquireForFile(const std::string& out);

  DirectoryLock(DirectoryLock&& other) noexcept;
  DirectoryLock& operator=(DirectoryLock&& other) noexcept;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  // Removes the lock file if it is still the one locked, then releases the lock (closes it).
  ~DirectoryLock();

  // DIR/.shardkit.lock.
  const std::string& path() const { return path_; }

  // The interrupt handler no longer removes the lock file: for a holder about to move it away
  // with its directory (a swap), after which path() may name another run's lock file. The lock
  // stays held; the destructor still removes the file only if it is the one at path().
  void DetachFromInterrupt() { on_interrupt_.Release(); }

 private:
  DirectoryLock(std::string path, int fd);
  // Locks the file at `path`; `busy` says who holds it, `instead` what else the user may do.
  static absl::StatusOr<DirectoryLock> AcquireAt(std::string path, const std::string& busy,
                                                 const char* instead);
  void Release();

  std::string path_;
  int fd_ = -1;
  // While held, the lock file is one the interrupt handler removes (interrupt.h, kOwnFile): a run
  // stopped by SIGINT, SIGTERM or SIGHUP leaves no lock file either.
  InterruptCleanup on_interrupt_;
};

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_DIR_LOCK_H_
