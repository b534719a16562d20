// Connecting a rank, the program side: a rank program picks its backend by name at run time —
// from ConnectOptions or from the environment that `shardkit launch` (core/base/env.h), torchrun,
// mpirun or srun sets (launcher_env.h). The
// backends themselves register by name (backend_registry.h); link //backends:all to get every
// backend built for this configuration.
//
//   // Any rank program (under `shardkit launch`):
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, ConnectFromEnv());
//
//   // Explicitly:
//   ConnectOptions options;
//   options.rank = 1;
//   options.world_size = 4;
//   options.store_url = "file:///data/run1";
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Connect(options));
#ifndef SHARDKIT_CORE_COMM_CONNECT_H_
#define SHARDKIT_CORE_COMM_CONNECT_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"

namespace shardkit {

// Connects this rank. The backend is found by name: built in, else a plugin
// (core/comm/backend_loader.h). The communicator's first collective checks that every rank runs
// the same build of the backend (AgreeOnBackendBuild), so its first call of yours has seq 2.
// Errors: kInvalidArgument for world_size < 1, a rank outside the world, a non-positive timeout, a
// missing store (a world of more than one with a backend that needs one, BackendNeedsStore), or
// both hostname and ifname; kNotFound for a backend that is neither built in nor a plugin on the
// search path (the message lists both); kFailedPrecondition for a plugin that cannot be loaded or
// for ranks running different builds; from the rendezvous, on every rank of the job alike,
// kInvalidArgument naming a rank that two processes claimed and kDeadlineExceeded naming the
// ranks that never joined (JoinFreshGeneration, core/store/rendezvous.h); the backend's errors.
// A tcp:// store_url is served by rank 0's process unless its port is served already (by
// `shardkit launch`): see OpenStoreAsRank (core/store/store_url.h).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Connect(ConnectOptions options);

struct LoadedBackend;
namespace internal {
// Connect with a backend already found (tests load plugins of other builds this way).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> ConnectWithBackend(
    const LoadedBackend& backend, ConnectOptions options);
}  // namespace internal

// Reads rank, world size and local rank from the launcher that started this process
// (launcher_env.h: SHARDKIT_RANK / SHARDKIT_WORLD_SIZE / SHARDKIT_LOCAL_RANK of `shardkit launch`,
// defaults 0, 1 and the rank; else torchrun's, Open MPI's or srun's variables; else a world of
// one), SHARDKIT_BACKEND (default gloo), SHARDKIT_STORE, SHARDKIT_TIMEOUT (seconds, default
// env::kDefaultTimeout), SHARDKIT_HOSTNAME, SHARDKIT_IFNAME; then CompleteForLauncher (a run
// namespace in the store, the host's address) for a rank of another launcher, whose warnings about
// disagreeing outer launchers go to stderr once. Errors: kInvalidArgument naming a malformed
// variable, or saying to set SHARDKIT_STORE; those of CompleteForLauncher.
[[nodiscard]] absl::StatusOr<ConnectOptions> ConnectOptionsFromEnv();

// The same, with `adjust` applied to the options read from the environment before
// CompleteForLauncher: a program's own arguments (the Python package's init(store=...)) override
// the variables, and the launcher's run namespace is still added to the store they name.
[[nodiscard]] absl::StatusOr<ConnectOptions> ConnectOptionsFromEnv(
    absl::FunctionRef<void(ConnectOptions&)> adjust);

// Connect(ConnectOptionsFromEnv()).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> ConnectFromEnv();

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_CONNECT_H_
