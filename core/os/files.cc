#include "core/os/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"

namespace shardkit::os {
namespace {

constexpr char kTempInfix[] = ".tmp.";

// The directory holding `path` ("." for a bare name).
std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The state letter of process `pid` (R, S, D, Z, ...), from /proc/PID/stat; nullopt if unreadable.
std::optional<char> ProcessState(int64_t pid) {
  const Fd fd(::open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  char text[512];
  const ssize_t n = ::read(fd.get(), text, sizeof(text) - 1);
  if (n <= 0) return std::nullopt;
  const std::string_view stat(text, static_cast<size_t>(n));
  const size_t close = stat.rfind(") ");  // the name may hold spaces and parentheses
  if (close == std::string_view::npos || close + 2 >= stat.size()) return std::nullopt;
  return stat[close + 2];
}

}  // namespace

absl::Status SyncDirectory(const std::string& dir) {
  const Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot open to sync: ", ErrnoText(errno)));
  }
  // EINVAL: this file system does not sync directories; its entries are as durable as it allows.
  const int err = SyncFd(fd.get());
  if (err != 0 && err != EINVAL) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot sync: ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& dir) {
  return CreatedDirectories::Make(dir).status();  // destroyed: the directories are kept
}

absl::StatusOr<CreatedDirectories> CreatedDirectories::Make(const std::string& dir) {
  namespace fs = std::filesystem;
  CreatedDirectories made;
  made.dir_ = dir;
  while (made.dir_.size() > 1 && made.dir_.back() == '/') made.dir_.pop_back();
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::directory) return made;
  if (status.type() != fs::file_type::not_found) {
    return absl::InvalidArgumentError(
        ec ? absl::StrCat(dir, ": cannot use the directory: ", ec.message())
           : absl::StrCat(dir, ": exists and is not a directory"));
  }
  // The missing ones, `dir` first: below the deepest path that exists (or cannot be examined).
  std::vector<std::string> missing = {made.dir_};
  for (fs::path parent = fs::path(made.dir_).parent_path(); !parent.empty();
       parent = parent.parent_path()) {
    if (fs::status(parent, ec).type() != fs::file_type::not_found) break;
    missing.push_back(parent.string());
    if (parent == parent.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    bool created = false;
    absl::StatusOr<InterruptCleanup> registration =
        InterruptCleanup::Register(*it, CleanupKind::kDirectory, [&] {
          if (::mkdir(it->c_str(), 0777) == 0) {
            created = true;
            return absl::OkStatus();
          }
          const int err = errno;
          if (err == EEXIST && fs::is_directory(*it, ec)) return absl::OkStatus();  // a peer's
          return absl::InvalidArgumentError(
              absl::StrCat(dir, ": cannot create the directory: ", ErrnoText(err)));
        });
    if (!registration.ok()) {
      made.RemoveIfEmpty();
      return registration.status();
    }
    if (!created) continue;  // `registration` is released: not ours
    made.dirs_.push_back(*it);
    made.registrations_.push_back(*std::move(registration));
    made.created_ = *it == made.dir_;
  }
  return made;
}

void CreatedDirectories::AddOwnFile(const std::string& path) {
  if (!created_ || dirs_.empty()) return;
  own_files_.push_back(path);
  registrations_.push_back(InterruptCleanup::Register(path, CleanupKind::kOwnFile));
}

bool CreatedDirectories::RemoveIfEmpty() {
  for (const std::string& file : own_files_) ::unlink(file.c_str());
  bool removed = false;
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    if (!RemoveEmptyDirectory(it->c_str(), kDirectorySettleMs)) break;
    removed = removed || *it == dir_;  // the first one, when it is removed at all
  }
  Keep();
  return removed;
}

void CreatedDirectories::Keep() {
  registrations_.clear();
  dirs_.clear();
  own_files_.clear();
}

std::string TemporaryPath(const std::string& path) {
  return absl::StrCat(path, kTempInfix, ::getpid());
}

std::optional<TemporaryName> ParseTemporaryName(std::string_view name) {
  const size_t at = name.rfind(kTempInfix);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view digits = name.substr(at + std::strlen(kTempInfix));
  int64_t pid = 0;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &pid) || pid < 1 ||
      pid > std::numeric_limits<pid_t>::max()) {
    return std::nullopt;
  }
  return TemporaryName{name.substr(0, at), pid};
}

bool ProcessGone(int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  // A zombie (killed, not reaped yet) answers kill(2) but writes nothing any more: its state in
  // /proc/PID/stat, the field after the parenthesised name, is Z (or X while it is being reaped).
  const std::optional<char> state = ProcessState(pid);
  return state && (*state == 'Z' || *state == 'X');
}

absl::StatusOr<std::vector<std::string>> RemoveDeadTemporaries(
    const std::string& dir, absl::FunctionRef<bool(std::string_view base)> is_ours,
    std::vector<std::string>* left_alone) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> dead;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::optional<TemporaryName> temp = ParseTemporaryName(name);
    if (!temp || !is_ours(temp->base)) continue;
    if (ProcessGone(temp->pid)) {
      dead.push_back(name);
    } else if (left_alone != nullptr) {
      left_alone->push_back(name);
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot list the directory: ", ec.message()));
  }
  std::sort(dead.begin(), dead.end());
  for (const std::string& name : dead) {
    const std::string path = (fs::path(dir) / name).string();
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": cannot remove (a temporary file of a process that is gone): ", ErrnoText(errno)));
    }
  }
  return dead;
}

std::string LeftAloneWarning(const std::string& dir, const std::string& name) {
  const std::optional<TemporaryName> temp = ParseTemporaryName(name);
  return absl::StrCat("warning: ", dir, ": left ", name, " alone: its process ",
                      temp ? temp->pid : 0,
                      " is running on this host (remove it yourself if no shardkit run is writing "
                      "there)");
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", ErrnoText(err)));
  }
  std::string contents;
  if (const int err = ReadToEnd(fd.get(), &contents); err != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", ErrnoText(err)));
  }
  return contents;
}

AtomicFile::AtomicFile(std::string path, std::string temp, int fd, InterruptCleanup registration)
    : path_(std::move(path)),
      temp_(std::move(temp)),
      fd_(fd),
      registration_(std::move(registration)) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      fd_(std::exchange(other.fd_, -1)),
      registration_(std::move(other.registration_)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    Discard();
    path_ = std::move(other.path_);
    temp_ = std::move(other.temp_);
    fd_ = std::exchange(other.fd_, -1);
    registration_ = std::move(other.registration_);
  }
  return *this;
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
  registration_.Release();
  fd_ = -1;
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& path) {
  std::string temp = TemporaryPath(path);
  int fd = -1;
  SHARDKIT_ASSIGN_OR_RETURN(
      InterruptCleanup registration,
      InterruptCleanup::Register(temp, CleanupKind::kTemporaryFile, [&] {
        fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) return absl::OkStatus();
        return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write: ", ErrnoText(errno)));
      }));
  return AtomicFile(path, std::move(temp), fd, std::move(registration));
}

absl::Status AtomicFile::Write(const void* data, size_t size) {
  if (const int err = WriteFully(fd_, data, size); err != 0) {
    return absl::UnavailableError(absl::StrCat(
        temp_, ": write failed: ", err == kNoBytes ? "no bytes written" : ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::WriteAt(uint64_t offset, const void* data, size_t size) {
  if (const int err = PwriteFully(fd_, data, size, offset); err != 0) {
    return absl::UnavailableError(
        absl::StrCat(temp_, ": write at offset ", offset,
                     " failed: ", err == kNoBytes ? "no bytes written" : ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::CopyFrom(int in, const std::string& in_name, uint64_t in_offset,
                                  uint64_t offset, size_t size) {
  int err = CopyFileRange(in, in_offset, fd_, offset, size);
  if (err == EXDEV || err == EINVAL || err == ENOSYS || err == EOPNOTSUPP) {
    std::vector<std::byte> buffer(std::min<size_t>(size, size_t{64} << 10));
    for (size_t done = 0; done < size && err != 0;) {
      const size_t n = std::min(buffer.size(), size - done);
      if (const int read = PreadFully(in, buffer.data(), n, in_offset + done); read != 0) {
        err = read;
        break;
      }
      SHARDKIT_RETURN_IF_ERROR(WriteAt(offset + done, buffer.data(), n));
      done += n;
      if (done == size) err = 0;
    }
  }
  if (err == kNoBytes)
    return absl::InvalidArgumentError(absl::StrCat(in_name, ": file is truncated"));
  if (err != 0) {
    return absl::UnavailableError(absl::StrCat(temp_, ": copying ", size, " bytes from ", in_name,
                                               " at offset ", in_offset,
                                               " failed: ", ErrnoText(err)));
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
  if (const int err = SyncFd(fd); err != 0) {
    status = absl::UnavailableError(absl::StrCat(temp_, ": fsync failed: ", ErrnoText(err)));
  }
  if (::close(fd) != 0 && status.ok()) {
    status = absl::UnavailableError(absl::StrCat(temp_, ": close failed: ", ErrnoText(errno)));
  }
  if (status.ok()) status = CheckOutputType(path_);  // what was put there while we wrote
  if (status.ok() && ::rename(temp_.c_str(), path_.c_str()) != 0) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path_, ": cannot rename into place: ", ErrnoText(errno)));
  }
  if (!status.ok()) ::unlink(temp_.c_str());
  registration_.Release();  // renamed into place, or removed
  if (!status.ok()) return status;
  return SyncDirectory(ParentDir(path_));
}

std::string FileTypeText(unsigned int mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status CheckOutputType(const std::string& out, const std::string& name) {
  struct stat st;
  if (::lstat(out.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(name, " ", out, ": cannot examine: ", ErrnoText(errno)));
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  if (S_ISLNK(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " ", out,
                     " is a symbolic link: shardkit neither follows nor replaces one (give the "
                     "path of a regular file, or of nothing)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(name, " ", out, " exists and is ",
                                                 FileTypeText(st.st_mode),
                                                 ", not a regular file: refusing to replace it"));
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  SHARDKIT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file.Write(contents.data(), contents.size()));
  return file.Commit();
}

}  // namespace shardkit::os
