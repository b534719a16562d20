#include "integration/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardkit::io {
namespace {

// flock without waiting, retried when a signal interrupts it. Returns 0, or -1 with errno set.
int LockNow(int fd) {
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

DirectoryLock::DirectoryLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

DirectoryLock::DirectoryLock(DirectoryLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirectoryLock::~DirectoryLock() { Release(); }

void DirectoryLock::Release() {
  if (fd_ < 0) return;
  ::close(fd_);  // closing the last descriptor of the open file releases the flock
  fd_ = -1;
}

absl::StatusOr<DirectoryLock> DirectoryLock::Acquire(const std::string& dir) {
  std::string path = (std::filesystem::path(dir) / kLockFileName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot open the lock file: ", std::strerror(errno)));
  }
  if (LockNow(fd) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": another shardkit run is writing this directory (it holds ", path,
                       "); wait for it to finish or choose another output directory"));
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot lock: ", std::strerror(err)));
  }
  return DirectoryLock(std::move(path), fd);
}

}  // namespace shardkit::io
