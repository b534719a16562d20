#include "integration/cli/relaunch.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"

namespace shardkit::cli {

bool UnderLauncher() { return std::getenv(env::kRank) != nullptr; }

absl::StatusOr<std::string> SelfExecutable() {
  std::error_code error;
  std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot find this executable (/proc/self/exe): ", error.message()));
  }
  return path.string();
}

absl::StatusOr<int> LaunchSelf(launch::LaunchOptions options,
                               const std::vector<std::string>& args) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string self, SelfExecutable());
  options.command = {std::move(self)};
  options.command.insert(options.command.end(), args.begin(), args.end());
  return launch::Launch(options);
}

}  // namespace shardkit::cli
