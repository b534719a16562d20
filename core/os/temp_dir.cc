#include "core/os/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"

namespace shardkit::os {

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

absl::Status TempDir::Create(const std::string& name_prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : P_tmpdir, "/", name_prefix, "-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot create a temporary directory from \"",
                                               pattern, "\": ", ErrnoText(errno)));
  }
  path_ = pattern;
  return absl::OkStatus();
}

}  // namespace shardkit::os
