// Which launcher started this process, and the rank and world it gave. `shardkit launch` sets
// SHARDKIT_RANK / SHARDKIT_WORLD_SIZE (core/base/env.h); when both are unset, the variables of the
// innermost of the launchers users already have are taken: torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK, with TORCHELASTIC_RUN_ID set), then Open MPI (OMPI_COMM_WORLD_RANK/_SIZE/
// _LOCAL_RANK), then Slurm inside an srun step (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, with
// SLURM_STEP_ID set; a batch script's own environment is not a job of N ranks). A world of one
// from one of those counts as no launcher, so `shard --nproc N` works inside `srun --pty bash`.
//
// ConnectOptionsFromEnv (connect.h) builds its options from this, and the CLI decides "one rank
// of a job, or start N local ranks" with it, so both always agree.
//
//   SHARDKIT_ASSIGN_OR_RETURN(LauncherEnv launcher, DetectLauncherFromEnv());
//   if (launcher.launcher == Launcher::kNone) { /* a world of one: run alone or start ranks */ }
//   SHARDKIT_RETURN_IF_ERROR(CompleteForLauncher(launcher, &options));  // run id, address
#ifndef SHARDKIT_CORE_COMM_LAUNCHER_ENV_H_
#define SHARDKIT_CORE_COMM_LAUNCHER_ENV_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/connect_options.h"

namespace shardkit {

enum class Launcher { kNone, kShardkit, kTorchrun, kOpenMpi, kSlurm };

struct LauncherEnv {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // This run's name, fit for a store namespace: SHARDKIT_RUN_ID if set (chosen by the user), else
  // TORCHELASTIC_RUN_ID (with ".restart<N>" after a torchrun restart; empty for torchrun's default
  // "none"), or "<SLURM_JOB_ID>.<SLURM_STEP_ID>". Empty when there is none (Open MPI). Unused for
  // kShardkit, whose SHARDKIT_STORE already holds the run's namespace.
  std::string run_id;
  // What was detected, for messages: `torchrun (RANK=1, WORLD_SIZE=4)`. Empty for kNone.
  std::string description;
  // One line per outer launcher whose rank or world (> 1) differs from the ones used, or whose
  // variables cannot be read; without a "warning:" prefix.
  std::vector<std::string> warnings;
};

// Looks a variable up: its value, or nullptr when unset. An empty value counts as unset.
using EnvLookup = std::function<const char*(const char* name)>;

// Detection, as the file comment says. Local ranks default to the rank.
// Errors: kInvalidArgument naming the variable: a value that is not an integer, a world < 1, a
// rank or local rank outside 0..world-1, a launcher's rank or world variable missing while its
// other variables are set, a run id containing '/'.
[[nodiscard]] absl::StatusOr<LauncherEnv> DetectLauncher(const EnvLookup& lookup);

// DetectLauncher over this process's environment.
[[nodiscard]] absl::StatusOr<LauncherEnv> DetectLauncherFromEnv();

// True for backends that rendezvous through a store (every one but "mpi", whose ranks meet
// through MPI itself).
bool BackendNeedsStore(std::string_view backend);

// For a rank of torchrun, mpirun or srun given a store, whose backend needs one (a no-op
// otherwise, and for kNone and kShardkit: `shardkit launch` already did this):
// `options->store_url` gets the run's own namespace — the launcher's run id, else one agreed
// through the store (JobRunId, once per process and store; none for a tcp:// store, which rank 0
// serves for this run alone) — and when neither hostname nor ifname is set, `options->hostname`
// becomes the numeric address this host's name resolves to (the first getaddrinfo gives). A
// missing store is left to Connect (MissingStoreError): the backend may still change after the
// environment is read.
// Errors: kFailedPrecondition when the host name cannot be read or resolved (naming
// SHARDKIT_HOSTNAME and SHARDKIT_IFNAME); the store's errors while agreeing on a run id.
[[nodiscard]] absl::Status CompleteForLauncher(const LauncherEnv& launcher,
                                               ConnectOptions* options);

// Connect's error for a world of more than one without a store, with a backend that needs one:
// kInvalidArgument saying to set SHARDKIT_STORE, and under torchrun, mpirun or srun naming what
// started the rank (`torchrun (RANK=1, WORLD_SIZE=4) started this rank, and backend gloo needs
// a rendezvous store every rank reaches: set SHARDKIT_STORE (…)`).
[[nodiscard]] absl::Status MissingStoreError(const LauncherEnv& launcher,
                                             const ConnectOptions& options);

// Prints each warning once per process to stderr, as "shardkit: warning: <line>".
void ReportLauncherWarnings(const LauncherEnv& launcher);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_LAUNCHER_ENV_H_
