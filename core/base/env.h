// The environment a rank program reads: variable names and their defaults, in one place. `shardkit
// launch` sets these for every rank (integration/launch), ConnectOptionsFromEnv reads them
// (core/comm/connect.h), and the CLI consults a few of its own (progress output, the CPU cache).
// docs/cli.md lists them for users.
#ifndef SHARDKIT_CORE_BASE_ENV_H_
#define SHARDKIT_CORE_BASE_ENV_H_

#include "absl/time/time.h"

namespace shardkit::env {

// Set by `shardkit launch` for every rank.
inline constexpr char kRank[] = "SHARDKIT_RANK";                        // global rank
inline constexpr char kLocalRank[] = "SHARDKIT_LOCAL_RANK";             // rank on this host
inline constexpr char kWorldSize[] = "SHARDKIT_WORLD_SIZE";             // ranks in the job
inline constexpr char kLocalWorldSize[] = "SHARDKIT_LOCAL_WORLD_SIZE";  // ranks on this host
inline constexpr char kBackend[] = "SHARDKIT_BACKEND";                  // "gloo", "nccl"
inline constexpr char kStore[] = "SHARDKIT_STORE";                      // rendezvous store URL
inline constexpr char kRunId[] = "SHARDKIT_RUN_ID";                     // this run's key namespace
inline constexpr char kTimeout[] = "SHARDKIT_TIMEOUT";                  // seconds per operation
inline constexpr char kHostname[] = "SHARDKIT_HOSTNAME";                // address the backend binds
inline constexpr char kIfname[] = "SHARDKIT_IFNAME";                    // or the interface it binds
inline constexpr char kLaunchId[] = "SHARDKIT_LAUNCH_ID";  // one launcher's, for all its ranks

// Where backend plugins are searched first (colon-separated directories;
// core/comm/backend_loader.h).
inline constexpr char kPluginPath[] = "SHARDKIT_PLUGIN_PATH";
// Set by the launchers users already have; read only when kRank and kWorldSize are both unset
// (core/comm/launcher_env.h), innermost first: torchrun, Open MPI's mpirun, Slurm's srun.
inline constexpr char kTorchrunRunId[] = "TORCHELASTIC_RUN_ID";  // marks torchrun; its run id
inline constexpr char kTorchrunRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kTorchrunRank[] = "RANK";
inline constexpr char kTorchrunWorldSize[] = "WORLD_SIZE";
inline constexpr char kTorchrunLocalRank[] = "LOCAL_RANK";
inline constexpr char kOmpiRank[] = "OMPI_COMM_WORLD_RANK";
inline constexpr char kOmpiWorldSize[] = "OMPI_COMM_WORLD_SIZE";
inline constexpr char kOmpiLocalRank[] = "OMPI_COMM_WORLD_LOCAL_RANK";
inline constexpr char kSlurmStepId[] = "SLURM_STEP_ID";  // set inside an srun step only
inline constexpr char kSlurmJobId[] = "SLURM_JOB_ID";
inline constexpr char kSlurmRank[] = "SLURM_PROCID";
inline constexpr char kSlurmWorldSize[] = "SLURM_NTASKS";
inline constexpr char kSlurmLocalRank[] = "SLURM_LOCALID";

// Read by the CLI and the CPU allocator.
inline constexpr char kProgress[] = "SHARDKIT_PROGRESS";          // "1": progress lines on stderr
inline constexpr char kCpuCacheMib[] = "SHARDKIT_CPU_CACHE_MIB";  // allocator block cache size

// Defaults when a variable is unset (or empty).
inline constexpr char kDefaultBackend[] = "gloo";
inline constexpr absl::Duration kDefaultTimeout = absl::Seconds(60);
// Where ranks of a single-host launch listen when neither kHostname nor kIfname is set.
inline constexpr char kLocalHostname[] = "127.0.0.1";

}  // namespace shardkit::env

#endif  // SHARDKIT_CORE_BASE_ENV_H_
