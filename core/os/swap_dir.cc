#include "core/os/swap_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"
#include "core/os/files.h"

namespace shardkit::os {
namespace {

absl::Status RenameError(const std::string& from, const std::string& to, int err) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot swap ", from, " and ", to, ": ", ErrnoText(err)));
}

// The three renames, for a file system without RENAME_EXCHANGE. Each step that fails undoes the
// ones before it.
absl::Status ExchangeByRenames(const std::string& a, const std::string& b) {
  const std::string aside = absl::StrCat(a, ".swap.", ::getpid());
  if (::rename(a.c_str(), aside.c_str()) != 0) return RenameError(a, b, errno);
  if (::rename(b.c_str(), a.c_str()) != 0) {
    const int err = errno;
    (void)::rename(aside.c_str(), a.c_str());
    return RenameError(a, b, err);
  }
  if (::rename(aside.c_str(), b.c_str()) != 0) {
    const int err = errno;
    (void)::rename(a.c_str(), b.c_str());
    (void)::rename(aside.c_str(), a.c_str());
    return RenameError(a, b, err);
  }
  return absl::OkStatus();
}

std::string Parent(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

absl::Status ExchangeDirectories(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    if (err != EINVAL && err != ENOSYS) return RenameError(a, b, err);
    SHARDKIT_RETURN_IF_ERROR(ExchangeByRenames(a, b));
  }
  SHARDKIT_RETURN_IF_ERROR(SyncDirectory(Parent(a)));
  if (Parent(b) == Parent(a)) return absl::OkStatus();
  return SyncDirectory(Parent(b));
}

bool RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return !ec;
}

}  // namespace shardkit::os
