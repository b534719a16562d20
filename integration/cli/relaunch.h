// Commands that run on several local ranks (`shardkit demo`, `shardkit shard --nproc N`,
// `shardkit bench`) start their ranks by re-executing this very binary under the launcher
// (integration/launch/launch.h), so `--nproc N` means exactly
// `shardkit launch --nproc N -- shardkit <the other arguments>` — except that an error the
// failed ranks share is printed once, with their ranks (LaunchSelf). What --nproc, --backend and
// --timeout (RankFlags, flags.h) set is applied here too, to a rank's connection or a launch.
//
//   if (UnderLauncher()) return RunOneRank(...);  // shardkit launch, torchrun, mpirun, srun
//   launch::LaunchOptions options;
//   options.nproc = 4;
//   SHARDKIT_ASSIGN_OR_RETURN(int exit_code, LaunchSelf(options, {"demo", "--summary", path}));
#ifndef SHARDKIT_INTEGRATION_CLI_RELAUNCH_H_
#define SHARDKIT_INTEGRATION_CLI_RELAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/connect.h"
#include "integration/cli/flags.h"
#include "integration/launch/launch.h"

namespace shardkit::cli {

// True if this process is one rank of a launched job: DetectLauncherFromEnv
// (core/comm/launcher_env.h) finds `shardkit launch`, or torchrun, mpirun or srun with a world
// larger than one. Launcher variables that cannot be read count as a launcher, so that connecting
// reports them.
bool UnderLauncher();

// OK when no launcher is detected, so that --nproc may start local ranks.
// Errors: kInvalidArgument "--nproc cannot be used under a launcher (<what was detected>):
// <hint>"; detection's errors (a malformed launcher variable).
[[nodiscard]] absl::Status CheckNprocAllowed(const std::string& hint);

// The connection one rank makes: ConnectOptionsFromEnv, with --backend and --timeout, when
// given, beating the environment. Errors: those of ConnectOptionsFromEnv.
[[nodiscard]] absl::StatusOr<ConnectOptions> ConnectOptionsFor(const RankFlags& flags);

// Sets `options.nproc` to --nproc, and its backend and timeout to --backend and --timeout when
// they were given (else the launcher takes them from the environment).
void ApplyRankFlags(const RankFlags& flags, launch::LaunchOptions& options);

// The absolute path of the running executable (the target of /proc/self/exe).
// Errors: kInternal if it cannot be read.
[[nodiscard]] absl::StatusOr<std::string> SelfExecutable();

// Runs `options.nproc` local ranks of this executable with `args` (a subcommand and its flags);
// `options.command` is replaced. The ranks' output is prefixed as `shardkit launch` prefixes it,
// but an error line that failed ranks share ("shardkit <subcommand>: …") is printed once, as
// "ranks 0-3: shardkit <subcommand>: …", in place of their exit lines
// (launch::LaunchOptions::error_prefix, integration/launch/error_lines.h). Returns the launcher's
// exit status (lowest failed rank's code).
// Errors: those of SelfExecutable and launch::Launch.
[[nodiscard]] absl::StatusOr<int> LaunchSelf(launch::LaunchOptions options,
                                             const std::vector<std::string>& args);

}  // namespace shardkit::cli

#endif  // SHARDKIT_INTEGRATION_CLI_RELAUNCH_H_
