// File descriptors: the one owning `Fd`, the text of an errno, and whole-buffer reads and writes
// retried on EINTR and short counts — the loops every file and pipe user of shardkit needs.
//
//   os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) return absl::UnavailableError(absl::StrCat(path, ": ", os::ErrnoText(errno)));
//   if (const int err = os::PreadFully(fd.get(), buffer, size, offset); err != 0) {
//     return ... err == os::kNoBytes ? "truncated" : os::ErrnoText(err) ...;
//   }
//
// The transfer helpers return 0, an errno, or kNoBytes, so every caller keeps its own messages and
// status codes. They call only read(2), write(2), pread(2) and pwrite(2): async-signal-safe, so a
// signal handler may use WriteFully. They are for blocking descriptors; sockets with deadlines
// are in socket.h.
#ifndef SHARDKIT_CORE_OS_FD_H_
#define SHARDKIT_CORE_OS_FD_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardkit::os {

// Owns a file descriptor (-1: none) and closes it on destruction (which also releases an flock
// held through it). Movable, not copyable; not thread-safe.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership: returns the descriptor, leaving -1.
  int release();
  // Closes the descriptor, if any.
  void reset();

 private:
  int fd_ = -1;
};

// The message of errno `err` ("Connection refused"), as strerror.
std::string ErrnoText(int err);

// What a transfer helper returns when a call moved no bytes without an error: a read that met the
// end of the file before `size` bytes, a write that wrote nothing.
inline constexpr int kNoBytes = -1;

// The largest count passed to one read/write call: Linux moves at most about 2 GiB per call.
inline constexpr size_t kMaxTransferChunk = size_t{1} << 30;

// Writes all `size` bytes at the file position. Returns 0, an errno (EPIPE, ENOSPC, ...) or
// kNoBytes.
[[nodiscard]] int WriteFully(int fd, const void* data, size_t size);

// Writes all `size` bytes at byte `offset` (the file position does not move). Returns as
// WriteFully.
[[nodiscard]] int PwriteFully(int fd, const void* data, size_t size, uint64_t offset);

// Reads exactly `size` bytes at the file position. Returns 0, an errno, or kNoBytes if the file
// ends first (the bytes read so far are in `out`).
[[nodiscard]] int ReadFully(int fd, void* out, size_t size);

// Reads exactly `size` bytes at byte `offset`. Returns as ReadFully.
[[nodiscard]] int PreadFully(int fd, void* out, size_t size, uint64_t offset);

// Appends everything up to the end of the file to `out`. Returns 0 or an errno.
[[nodiscard]] int ReadToEnd(int fd, std::string* out);

// Copies `size` bytes from byte `in_offset` of `in` to byte `out_offset` of `out` inside the kernel
// (copy_file_range(2): no copy through this process's memory; on some file systems no copy at
// all). Returns 0, an errno (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP: the kernel cannot copy between
// these two files — the caller copies itself), or kNoBytes if `in` ends first.
[[nodiscard]] int CopyFileRange(int in, uint64_t in_offset, int out, uint64_t out_offset,
                                size_t size);

// fsync, retried on EINTR. Returns 0 or an errno.
[[nodiscard]] int SyncFd(int fd);

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_FD_H_
