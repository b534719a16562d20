#include "core/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"
#include "core/store/internal/store_util.h"

namespace shardkit {
namespace {

constexpr size_t kMaxEncodedKey = 200;

using os::Fd;  // closing it also releases an flock held through it

absl::Status IoError(absl::string_view what, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat(what, " \"", path, "\": ", std::strerror(err)));
}

// mkdir -p, mapping errno to the caller's recovery action.
absl::Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) == 0) continue;
    int err = errno;
    struct stat st;
    if (err == EEXIST && ::stat(prefix.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) continue;
      err = ENOTDIR;
    }
    std::string message =
        absl::StrCat("FileStore: cannot create directory \"", dir, "\": ", std::strerror(err));
    if (prefix != dir) absl::StrAppend(&message, " (at \"", prefix, "\")");
    switch (err) {
      case ENOTDIR:
      case ENAMETOOLONG:
      case ELOOP:
        return absl::InvalidArgumentError(message);
      case EACCES:
      case EPERM:
      case EROFS:
        return absl::PermissionDeniedError(message);
      default:
        return absl::UnavailableError(message);
    }
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  const int err = os::WriteFully(fd, data.data(), data.size());
  return err == 0 ? absl::OkStatus()
                  : IoError("FileStore: cannot write", path, err == os::kNoBytes ? EIO : err);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(std::string dir) {
  if (dir.empty()) return absl::InvalidArgumentError("FileStore: empty directory name");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  SHARDKIT_RETURN_IF_ERROR(MakeDirs(dir));
  return std::unique_ptr<FileStore>(new FileStore(std::move(dir)));
}

FileStore::FileStore(std::string dir)
    : PollingStore(absl::StrCat("FileStore(", dir, ")")), dir_(std::move(dir)) {}

absl::StatusOr<std::string> FileStore::Encode(std::string_view key) const {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(name(), key));
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  for (unsigned char c : key) {
    if (absl::ascii_isalnum(c) || c == '_' || c == '-') {
      encoded.push_back(static_cast<char>(c));
    } else {
      encoded += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  if (encoded.size() > kMaxEncodedKey) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": key \"", absl::CHexEscape(internal::AbslView(key.substr(0, 40))),
        "...\" is too long (", encoded.size(), " bytes encoded, at most ", kMaxEncodedKey, ")"));
  }
  return encoded;
}

std::string FileStore::PathOf(char kind, const std::string& encoded) const {
  return absl::StrCat(dir_, "/", absl::string_view(&kind, 1), "_", encoded);
}

absl::StatusOr<std::optional<std::string>> FileStore::ReadEncoded(const std::string& encoded) {
  const std::string path = PathOf('k', encoded);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    return IoError("FileStore: cannot open", path, errno);
  }
  std::string value;
  if (const int err = os::ReadToEnd(fd.get(), &value); err != 0) {
    return IoError("FileStore: cannot read", path, err);
  }
  return value;
}

absl::Status FileStore::WriteEncoded(const std::string& encoded, std::string_view value) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = PathOf('k', encoded);
  const std::string temp =
      absl::StrCat(PathOf('t', encoded), ".", ::getpid(), ".", counter.fetch_add(1));
  {
    Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return IoError("FileStore: cannot create", temp, errno);
    absl::Status written = WriteAll(fd.get(), value, temp);
    if (!written.ok()) {
      ::unlink(temp.c_str());
      return written;
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return IoError("FileStore: cannot rename to", path, err);
  }
  return absl::OkStatus();
}

absl::Status FileStore::Set(std::string_view key, std::string_view value) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string encoded, Encode(key));
  return WriteEncoded(encoded, value);
}

absl::StatusOr<int64_t> FileStore::Add(std::string_view key, int64_t delta) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string encoded, Encode(key));
  const std::string lock_path = PathOf('l', encoded);
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) return IoError("FileStore: cannot open lock", lock_path, errno);
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return IoError("FileStore: cannot lock", lock_path, errno);
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::optional<std::string> old, ReadEncoded(encoded));
  SHARDKIT_ASSIGN_OR_RETURN(int64_t value, internal::AddToCounter(name(), key, old, delta));
  SHARDKIT_RETURN_IF_ERROR(WriteEncoded(encoded, absl::StrCat(value)));
  return value;  // `lock` closes here, releasing the flock.
}

// A file read: `deadline` is not needed.
absl::StatusOr<std::optional<std::string>> FileStore::TryGet(std::string_view key,
                                                             absl::Time /*deadline*/) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string encoded, Encode(key));
  return ReadEncoded(encoded);
}

absl::StatusOr<bool> FileStore::Exists(std::string_view key, absl::Time /*deadline*/) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string encoded, Encode(key));
  const std::string path = PathOf('k', encoded);
  if (::access(path.c_str(), F_OK) == 0) return true;
  if (errno == ENOENT) return false;
  return IoError("FileStore: cannot stat", path, errno);
}

}  // namespace shardkit
