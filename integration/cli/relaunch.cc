#include "integration/cli/relaunch.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/launcher_env.h"

namespace shardkit::cli {

bool UnderLauncher() {
  absl::StatusOr<LauncherEnv> launcher = DetectLauncherFromEnv();
  return !launcher.ok() || launcher->launcher != Launcher::kNone;
}

absl::Status CheckNprocAllowed(const std::string& hint) {
  SHARDKIT_ASSIGN_OR_RETURN(LauncherEnv launcher, DetectLauncherFromEnv());
  if (launcher.launcher == Launcher::kNone) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--nproc cannot be used under a launcher (",
                                                 launcher.description, " detected): ", hint));
}

absl::StatusOr<ConnectOptions> ConnectOptionsFor(const RankFlags& flags) {
  SHARDKIT_ASSIGN_OR_RETURN(ConnectOptions connect, ConnectOptionsFromEnv());
  if (flags.backend_set) connect.backend = flags.backend;
  if (flags.timeout_set) connect.timeout = absl::Seconds(flags.timeout_s);
  return connect;
}

void ApplyRankFlags(const RankFlags& flags, launch::LaunchOptions& options) {
  options.nproc = static_cast<int>(flags.nproc);
  if (flags.backend_set) options.backend = flags.backend;
  if (flags.timeout_set) options.timeout_s = flags.timeout_s;
}

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
  // What ReportError starts each rank's error with: an error the ranks share is printed once.
  if (!args.empty()) options.error_prefix = absl::StrCat("shardkit ", args[0], ": ");
  return launch::Launch(options);
}

}  // namespace shardkit::cli
