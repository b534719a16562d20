#include "integration/io/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/io/output_file.h"

namespace shardkit::io {
namespace {

constexpr size_t kMaxChunk = size_t{1} << 30;  // per write call: Linux caps one call near 2 GiB

std::string ErrnoText(int err) { return std::strerror(err); }

// fsync, retried when a signal interrupts it. Returns 0, or -1 with errno set.
int SyncFd(int fd) {
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// The directory holding `path` ("." for a bare name).
std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot open to sync: ", ErrnoText(errno)));
  }
  // EINVAL: this file system does not sync directories; its entries are as durable as it allows.
  const int rc = SyncFd(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot sync: ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::directory) return absl::OkStatus();
  if (status.type() != fs::file_type::not_found) {
    return absl::InvalidArgumentError(
        ec ? absl::StrCat(dir, ": cannot use the directory: ", ec.message())
           : absl::StrCat(dir, ": exists and is not a directory"));
  }
  if (fs::create_directories(dir, ec); ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot create the directory: ", ec.message()));
  }
  return absl::OkStatus();
}

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
    const size_t chunk = std::min(size, kMaxChunk);
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

absl::Status AtomicFile::WriteAt(uint64_t offset, const void* data, size_t size) {
  const auto* in = static_cast<const char*>(data);
  while (size > 0) {
    const size_t chunk = std::min(size, kMaxChunk);
    ssize_t n = ::pwrite(fd_, in, chunk, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat(temp_, ": write at offset ", offset, " failed: ",
                                                 n < 0 ? ErrnoText(errno) : "no bytes written"));
    }
    in += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Resize(uint64_t size) {
  int rc;
  do {
    rc = ::ftruncate(fd_, static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat(temp_, ": cannot resize to ", size, " bytes: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

void AtomicFile::StartWriteback(uint64_t offset, uint64_t size) {
#ifdef SYNC_FILE_RANGE_WRITE
  (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                          SYNC_FILE_RANGE_WRITE);
#else
  (void)offset;
  (void)size;
#endif
}

absl::Status AtomicFile::Commit() {
  const int fd = std::exchange(fd_, -1);
  absl::Status status;
  if (SyncFd(fd) != 0) {
    status = absl::UnavailableError(absl::StrCat(temp_, ": fsync failed: ", ErrnoText(errno)));
  }
  if (::close(fd) != 0 && status.ok()) {
    status = absl::UnavailableError(absl::StrCat(temp_, ": close failed: ", ErrnoText(errno)));
  }
  if (status.ok()) status = CheckOutputType(path_);  // what was put there while we wrote
  if (status.ok() && ::rename(temp_.c_str(), path_.c_str()) != 0) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path_, ": cannot rename into place: ", ErrnoText(errno)));
  }
  if (!status.ok()) {
    ::unlink(temp_.c_str());
    return status;
  }
  return SyncDirectory(ParentDir(path_));
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  SHARDKIT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file.Write(contents.data(), contents.size()));
  return file.Commit();
}

}  // namespace shardkit::io
