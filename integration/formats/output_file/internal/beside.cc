#include "integration/formats/output_file/internal/beside.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/os/fd.h"
#include "core/os/files.h"
#include "core/os/swap_dir.h"
#include "integration/formats/output_file/output_directory.h"

namespace shardkit::formats::internal {
namespace {

namespace fs = std::filesystem;

// Whether `name` is .BASE<infix>HEX (16 hex digits): what a run into `base` writes beside it.
bool IsBesideOf(const std::string& name, const std::string& base, const char* infix) {
  const std::string prefix = absl::StrCat(".", base, infix);
  if (!absl::StartsWith(name, prefix) || name.size() != prefix.size() + 16) return false;
  return std::all_of(name.begin() + static_cast<ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

std::vector<fs::path> BesideOf(const fs::path& dir, const char* infix) {
  std::vector<fs::path> found;
  std::error_code ec;
  const std::string base = dir.filename().string();
  for (fs::directory_iterator it(dir.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type;
    if (IsBesideOf(it->path().filename().string(), base, infix) && it->is_directory(type)) {
      found.push_back(it->path());
    }
  }
  return found;
}

void RemoveBesideOf(const fs::path& real, bool set_aside) {
  for (const char* infix : {kNewInfix, kProbeInfix, kOldInfix}) {
    if (infix == kOldInfix && !set_aside) continue;
    for (const fs::path& path : BesideOf(real, infix)) os::RemoveTree(path.string());
  }
}

void RecoverSetAside(const std::string& dir, const OutputKinds& kinds) {
  std::error_code ec;
  const fs::path path = fs::absolute(dir, ec).lexically_normal();
  if (ec || fs::symlink_status(path, ec).type() != fs::file_type::not_found) return;
  for (const fs::path& aside : BesideOf(path, kOldInfix)) {
    absl::StatusOr<OutputContents> contents = ExamineOutputDir(aside.string(), kinds);
    if (contents.ok() && contents->complete && ::rename(aside.c_str(), path.c_str()) == 0) {
      (void)os::SyncDirectory(path.parent_path().string());
      return;
    }
  }
}

absl::StatusOr<bool> CanSwapInto(const std::string& fresh, const std::string& real,
                                 const std::string& suffix) {
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, real.c_str(), RENAME_NOREPLACE) == 0) {
    return absl::InternalError(absl::StrCat(real, " vanished while its lock was held"));
  }
  const int err = errno;
  if (err != EEXIST && err != EINVAL) {  // EINVAL: no RENAME_NOREPLACE here; the commit will tell
    return absl::InvalidArgumentError(absl::StrCat("the new directory cannot be renamed onto ",
                                                   real, " (", os::ErrnoText(err), ")"));
  }
  const fs::path path(real);
  const std::string probe =
      (path.parent_path() / absl::StrCat(".", path.filename().string(), kProbeInfix, suffix))
          .string();
  if (::mkdir(probe.c_str(), 0700) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", probe, " (", os::ErrnoText(errno), ")"));
  }
  const absl::Status swapped = os::ExchangeDirectories(fresh, probe);
  if (swapped.ok()) (void)os::ExchangeDirectories(fresh, probe);  // back: both are empty
  ::rmdir(probe.c_str());
  if (swapped.ok()) return true;
  if (absl::IsUnimplemented(swapped)) return false;
  return swapped;
}

}  // namespace shardkit::formats::internal
