#include "integration/formats/shard_dir/shard_dir_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"
#include "core/os/files.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::shard_dir {
namespace {

namespace fs = std::filesystem;

constexpr size_t kIndexHeadBytes = 4096;

// Whether the JSON text begins with {"format": "shardkit-shards" (whitespace allowed).
bool BeginsAsShardIndex(std::string_view text) {
  size_t at = 0;
  const auto skip = [&] {
    while (at < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[at]))) ++at;
  };
  const auto take = [&](std::string_view token) {
    skip();
    if (text.substr(at, token.size()) != token) return false;
    at += token.size();
    return true;
  };
  return take("{") && take("\"format\"") && take(":") &&
         take(absl::StrCat("\"", kIndexFormat, "\""));
}

absl::Status CheckIndexIsOurs(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexFileName).string();
  std::string head(kIndexHeadBytes, '\0');
  const os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ssize_t n = fd.valid() ? ::pread(fd.get(), head.data(), head.size(), 0) : -1;
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", os::ErrnoText(errno)));
  }
  head.resize(static_cast<size_t>(n));
  if (BeginsAsShardIndex(head)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      dir,
      ": holds an index.json that is not a shardkit shard index (it does not begin with "
      "{\"format\": \"shardkit-shards\"}): shardkit replaces only its own output; use a new "
      "or empty directory"));
}

}  // namespace

bool ShardDirOutput::IsOutputFile(std::string_view name) const {
  return name == kIndexFileName || RankOfFileName(name) >= 0;
}

absl::StatusOr<bool> ShardDirOutput::Examine(const std::string& dir,
                                             const std::vector<std::string>& names) const {
  if (std::find(names.begin(), names.end(), kIndexFileName) == names.end()) return false;
  SHARDKIT_RETURN_IF_ERROR(CheckIndexIsOurs(dir));
  return true;
}

std::string_view ShardDirOutput::last_file_name() const { return kIndexFileName; }

}  // namespace shardkit::shard_dir
