// Replacing a whole directory in one step: ExchangeDirectories swaps what two paths of one file
// system name (renameat2's RENAME_EXCHANGE), so that a reader of either path sees the directory it
// held before or the one it holds after, never a mix and never nothing; RemoveTree removes what
// was swapped out. The shard directory writers (integration/formats/output_file/output_directory.h)
// build a new output beside the old one and swap them as their commit.
//
//   SHARDKIT_RETURN_IF_ERROR(ExchangeDirectories("parent/.out.new", "parent/out"));
//   SHARDKIT_RETURN_IF_ERROR(SyncDirectory("parent"));
//   RemoveTree("parent/.out.new");  // now the earlier output
#ifndef SHARDKIT_CORE_OS_SWAP_DIR_H_
#define SHARDKIT_CORE_OS_SWAP_DIR_H_

#include <string>

#include "absl/status/status.h"

namespace shardkit::os {

// Swaps the entries `a` and `b` (two directories of one file system): afterwards `a` names what
// `b` named and the other way round, in one atomic step. Nothing is synced: the caller syncs the
// parent. Errors: kUnimplemented if the file system cannot exchange (EINVAL, ENOSYS: NFS, some
// FUSE file systems; nothing changed); kInvalidArgument naming both paths and the OS error (a
// missing path, two file systems: EXDEV, a mount point: EBUSY, no permission; nothing changed).
[[nodiscard]] absl::Status ExchangeDirectories(const std::string& a, const std::string& b);

// Removes `path` and everything below it (not following symbolic links). Returns false if
// anything could not be removed. Best effort: for what a run no longer needs.
bool RemoveTree(const std::string& path);

// Blocks SIGINT, SIGTERM and SIGHUP for the calling thread while it lives (they are delivered
// when it ends): for a few steps that must not be cut between each other (renames that move a
// directory aside and another into its place).
class ScopedInterruptBlock {
 public:
  ScopedInterruptBlock();
  ~ScopedInterruptBlock();
  ScopedInterruptBlock(const ScopedInterruptBlock&) = delete;
  ScopedInterruptBlock& operator=(const ScopedInterruptBlock&) = delete;

 private:
  unsigned long saved_[16];  // the thread's signal mask before (sigset_t, opaque here)
};

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_SWAP_DIR_H_
