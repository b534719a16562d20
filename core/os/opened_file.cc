#include "core/os/opened_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace shardkit::os {
namespace {

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

}  // namespace

absl::StatusOr<OpenedFile> OpenedFile::Open(const std::string& path) {
  OpenedFile file;
  file.path_ = path;
  file.fd_ = Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.fd_.valid()) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return Invalid(path, absl::StrCat("cannot open: ", ErrnoText(err)));
  }
  struct stat st {};
  if (::fstat(file.fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Invalid(path, "not a regular file");
  }
  file.size_ = static_cast<uint64_t>(st.st_size);
  file.device_ = static_cast<uint64_t>(st.st_dev);
  file.inode_ = static_cast<uint64_t>(st.st_ino);
  return file;
}

absl::Status OpenedFile::CheckUnchanged() const {
  struct stat held {
  }, at_path{};
  if (::fstat(fd_.get(), &held) != 0) {
    return Invalid(path_, absl::StrCat("fstat: ", ErrnoText(errno)));
  }
  if (static_cast<uint64_t>(held.st_size) != size_) {
    return Invalid(
        path_, absl::StrCat("changed while open: it had ", size_, " bytes, now ", held.st_size));
  }
  if (::stat(path_.c_str(), &at_path) != 0) {
    return Invalid(path_, absl::StrCat("was removed while open: ", ErrnoText(errno)));
  }
  if (static_cast<uint64_t>(at_path.st_dev) != device_ ||
      static_cast<uint64_t>(at_path.st_ino) != inode_) {
    return Invalid(path_, absl::StrCat("was replaced while open: another file (", at_path.st_size,
                                       " bytes) is at its path now"));
  }
  return absl::OkStatus();
}

absl::Status OpenedFile::Pread(uint64_t offset, uint64_t size, void* dst) const {
  const int err = PreadFully(fd_.get(), dst, static_cast<size_t>(size), offset);
  if (err == kNoBytes) return Invalid(path_, "file is truncated");
  if (err != 0)
    return absl::UnavailableError(absl::StrCat(path_, ": read failed: ", ErrnoText(err)));
  return absl::OkStatus();
}

}  // namespace shardkit::os
