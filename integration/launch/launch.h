// Launch: `shardkit launch` as a library — validates the options, prepares the run's store
// (a fresh temporary directory, or a fresh run-id namespace in the store given; a tcp:// store is
// served by the launcher of rank 0, from a thread, until its ranks are done and then for as long
// as other ranks stay connected to it, at most the grace period), builds each rank's SHARDKIT_*
// environment and runs the ranks (rank_processes.h).
//
//   LaunchOptions options;
//   options.nproc = 3;
//   options.command = {"sh", "-c", "echo $SHARDKIT_RANK"};
//   SHARDKIT_ASSIGN_OR_RETURN(int exit_code, Launch(options));
//
// Environment of rank R (local rank L): SHARDKIT_RANK=R, SHARDKIT_LOCAL_RANK=L,
// SHARDKIT_WORLD_SIZE, SHARDKIT_LOCAL_WORLD_SIZE (= nproc), SHARDKIT_BACKEND, SHARDKIT_STORE
// (the run's own namespace), SHARDKIT_RUN_ID, SHARDKIT_LAUNCH_ID (this launcher's own random
// id, which the rendezvous uses to tell its ranks from another launch's), SHARDKIT_TIMEOUT;
// SHARDKIT_HOSTNAME=127.0.0.1 for a single-host job unless SHARDKIT_HOSTNAME or SHARDKIT_IFNAME
// is already set. Everything else is inherited. Flags beat the environment:
// SHARDKIT_BACKEND/SHARDKIT_TIMEOUT already set are kept only when the flag is absent.
#ifndef SHARDKIT_INTEGRATION_LAUNCH_LAUNCH_H_
#define SHARDKIT_INTEGRATION_LAUNCH_LAUNCH_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "integration/launch/rank_processes.h"

namespace shardkit::launch {

struct LaunchOptions {
  int nproc = 0;
  int world = 0;  // 0: the same as nproc (a single-host job)
  int rank_offset = 0;
  std::optional<std::string> backend;  // default: $SHARDKIT_BACKEND, else "gloo"
  std::string store_url;               // empty: a fresh temporary FileStore directory
  std::string run_id;                  // empty: generated (see ChooseRunId)
  std::optional<double> timeout_s;     // default: $SHARDKIT_TIMEOUT, else env::kDefaultTimeout
  absl::Duration grace = absl::Seconds(5);
  bool prefix_stdout = true;  // false: ranks' stdout lines unprefixed (RunOptions::prefix_stdout)
  std::string error_prefix;   // non-empty: shared errors printed once (RunOptions::error_prefix)
  std::vector<std::string> command;
};

// Errors: kInvalidArgument naming the flag: nproc < 1, world < 1, rank offset < 0,
// rank_offset + nproc > world, a store URL that does not parse, a multi-host job (world > nproc)
// without a store or with a tcp:// store on port 0, a timeout <= 0, a negative grace, an empty
// command, a run id containing '/'.
[[nodiscard]] absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// The environment of each local rank, given the inherited one (`base`, "NAME=value" entries),
// the run's store URL and run id, and this launcher's id.
std::vector<RankProcessSpec> RankSpecs(const LaunchOptions& options,
                                       const std::vector<std::string>& base,
                                       const std::string& store_url, const std::string& run_id,
                                       const std::string& launch_id);

// Runs the job; returns the launcher's exit status (LaunchExitCode). Removes the temporary store
// directory, if it made one, before returning.
// Errors: those of ValidateLaunchOptions; of OpenStore for a bad or unreachable --store
// (kInvalidArgument, kPermissionDenied, kUnavailable; a tcp:// store is waited for up to the
// timeout); of TcpStoreServer::Start when rank 0's launcher cannot serve its tcp:// store (port
// in use, host not this machine); kUnavailable if processes cannot start.
[[nodiscard]] absl::StatusOr<int> Launch(const LaunchOptions& options);

}  // namespace shardkit::launch

#endif  // SHARDKIT_INTEGRATION_LAUNCH_LAUNCH_H_
