#include "core/os/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/os/fd.h"

namespace shardkit::os {
namespace {

// flock without waiting, retried when a signal interrupts it. Returns 0, or -1 with errno set.
int LockNow(int fd) {
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// Whether the open file `fd` is the one at `path` now (same device and inode). False when `path`
// is gone, or is another file: the one `fd` refers to was removed, perhaps replaced, meanwhile.
bool IsAtPath(int fd, const std::string& path) {
  struct stat held, named;
  if (::fstat(fd, &held) != 0 || ::stat(path.c_str(), &named) != 0) return false;
  return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

// Acquire's tries when the lock file keeps being replaced under it. Each retry means another run
// took and finished with the directory meanwhile, so this is never reached in practice.
constexpr int kMaxAttempts = 1000;

}  // namespace

DirectoryLock::DirectoryLock(std::string path, int fd)
    : path_(std::move(path)),
      fd_(fd),
      on_interrupt_(InterruptCleanup::Register(path_, CleanupKind::kOwnFile)) {}

DirectoryLock::DirectoryLock(DirectoryLock&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      on_interrupt_(std::move(other.on_interrupt_)) {}

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    on_interrupt_ = std::move(other.on_interrupt_);
  }
  return *this;
}

DirectoryLock::~DirectoryLock() { Release(); }

void DirectoryLock::Release() {
  if (fd_ < 0) return;
  on_interrupt_.Release();
  // Removed while still locked: a run that opened this file meanwhile gets the flock only after
  // the close below, finds the path gone or another file there (IsAtPath), and tries again.
  // Another holder's file (ours removed by hand, another run's made) is left alone.
  if (IsAtPath(fd_, path_)) ::unlink(path_.c_str());
  ::close(fd_);  // closing the last descriptor of the open file releases the flock
  fd_ = -1;
}

absl::StatusOr<DirectoryLock> DirectoryLock::Acquire(const std::string& dir) {
  return AcquireAt((std::filesystem::path(dir) / kLockFileName).string(),
                   absl::StrCat(dir, ": another shardkit run is writing this directory"),
                   "choose another output directory");
}

absl::StatusOr<DirectoryLock> DirectoryLock::AcquireForFile(const std::string& out) {
  const std::filesystem::path path(out);
  return AcquireAt(
      (path.parent_path() / absl::StrCat(".", path.filename().string(), ".shardkit.lock")).string(),
      absl::StrCat(out, ": another shardkit run is writing this file"), "choose another output");
}

absl::StatusOr<DirectoryLock> DirectoryLock::AcquireAt(std::string path, const std::string& busy,
                                                       const char* instead) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot open the lock file: ", ErrnoText(errno)));
    }
    const int err = LockNow(fd) == 0 ? 0 : errno;
    // Between open and flock the holder may have finished: removed the file, which we then
    // locked (or found locked by its last holder) to no effect. Try the file at the path now.
    const bool current = IsAtPath(fd, path);
    if (err == 0 && current) return DirectoryLock(std::move(path), fd);
    ::close(fd);
    if (err == EWOULDBLOCK && current) {
      return absl::InvalidArgumentError(
          absl::StrCat(busy, " (it holds ", path, "); wait for it to finish or ", instead));
    }
    if (err != 0 && err != EWOULDBLOCK) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot lock: ", ErrnoText(err)));
    }
  }
  return absl::UnavailableError(absl::StrCat(path, ": the lock file was replaced ", kMaxAttempts,
                                             " times while this run tried to lock it"));
}

}  // namespace shardkit::os
