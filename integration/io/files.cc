#include "integration/io/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace shardkit::io {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", ErrnoText(err)));
  }
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", ErrnoText(err)));
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

AtomicFile::AtomicFile(std::string path, std::string temp, int fd)
    : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      fd_(std::exchange(other.fd_, -1)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    Discard();
    path_ = std::move(other.path_);
    temp_ = std::move(other.temp_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
  fd_ = -1;
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& path) {
  std::string temp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write: ", ErrnoText(errno)));
  }
  return AtomicFile(path, std::move(temp), fd);
}

absl::Status AtomicFile::Write(const void* data, size_t size) {
  const auto* in = static_cast<const char*>(data);
  while (size > 0) {
    const size_t chunk = std::min<size_t>(size, size_t{1} << 30);
    ssize_t n = ::write(fd_, in, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat(temp_, ": write failed: ", ErrnoText(errno)));
    }
    in += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  const int fd = std::exchange(fd_, -1);
  absl::Status status;
  if (::close(fd) != 0) {
    status = absl::UnavailableError(absl::StrCat(temp_, ": close failed: ", ErrnoText(errno)));
  } else if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path_, ": cannot rename into place: ", ErrnoText(errno)));
  }
  if (!status.ok()) ::unlink(temp_.c_str());
  return status;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  SHARDKIT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file.Write(contents.data(), contents.size()));
  return file.Commit();
}

}  // namespace shardkit::io
