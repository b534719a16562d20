#include "core/os/fd.h"

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace shardkit::os {
namespace {

// Moves `size` bytes through `call(done, chunk)` (one read or write of at most `chunk` bytes
// starting `done` bytes in), retried on EINTR and short counts. Returns 0, an errno or kNoBytes.
template <typename Call>
int TransferAll(size_t size, Call call) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = call(done, std::min(size - done, kMaxTransferChunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return kNoBytes;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string ErrnoText(int err) { return std::strerror(err); }

int WriteFully(int fd, const void* data, size_t size) {
  const auto* in = static_cast<const char*>(data);
  return TransferAll(size,
                     [&](size_t done, size_t chunk) { return ::write(fd, in + done, chunk); });
}

int PwriteFully(int fd, const void* data, size_t size, uint64_t offset) {
  const auto* in = static_cast<const char*>(data);
  return TransferAll(size, [&](size_t done, size_t chunk) {
    return ::pwrite(fd, in + done, chunk, static_cast<off_t>(offset + done));
  });
}

int ReadFully(int fd, void* out, size_t size) {
  auto* to = static_cast<char*>(out);
  return TransferAll(size, [&](size_t done, size_t chunk) { return ::read(fd, to + done, chunk); });
}

int PreadFully(int fd, void* out, size_t size, uint64_t offset) {
  auto* to = static_cast<char*>(out);
  return TransferAll(size, [&](size_t done, size_t chunk) {
    return ::pread(fd, to + done, chunk, static_cast<off_t>(offset + done));
  });
}

int ReadToEnd(int fd, std::string* out) {
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out->append(buffer, static_cast<size_t>(n));
  }
}

int CopyFileRange(int in, uint64_t in_offset, int out, uint64_t out_offset, size_t size) {
  return TransferAll(size, [&](size_t done, size_t chunk) {
    auto from = static_cast<off_t>(in_offset + done);
    auto to = static_cast<off_t>(out_offset + done);
    return ::copy_file_range(in, &from, out, &to, chunk, 0);
  });
}

int SyncFd(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace shardkit::os
