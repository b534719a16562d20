// Backend registry: communication backends register a factory under a name ("gloo", "nccl"), and
// a program picks one at run time by name — from ConnectOptions or from the environment that
// `shardkit launch` sets.
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
//
//   // A backend library (alwayslink = True), at namespace scope:
//   SHARDKIT_REGISTER_BACKEND("gloo", &CreateGlooCommunicator);
//
// Link //backends:all to get every backend built for this configuration.
#ifndef SHARDKIT_CORE_REGISTRY_H_
#define SHARDKIT_CORE_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/communicator.h"
#include "core/store.h"

namespace shardkit {

struct ConnectOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string backend = "gloo";
  // Rendezvous store, shared by all ranks; if null, Connect opens `store_url`. Not needed for a
  // world of one.
  std::shared_ptr<Store> store;
  std::string store_url;
  // Default per-call deadline of the communicator, and the rendezvous deadline.
  absl::Duration timeout = absl::Seconds(60);
  // Address or interface the backend binds (Gloo: default 127.0.0.1). At most one of them.
  std::string hostname;
  std::string ifname;
  // Keys of this communicator live under "<key_prefix>/comm<K>/", K counting this rank's Connect
  // calls with this store (URL, or object) and prefix in this process, so ranks that connect in
  // the same order agree on fresh keys without talking. Backends receive the final prefix here.
  std::string key_prefix;
};

// Creates one rank's communicator. `options.store` is set (for world_size > 1) and
// `options.key_prefix` is final when a factory is called.
using BackendFactory = absl::StatusOr<std::unique_ptr<Communicator>> (*)(const ConnectOptions&);

// Registers `factory` under `name`. Errors: kAlreadyExists if the name is taken.
[[nodiscard]] absl::Status RegisterBackend(const std::string& name, BackendFactory factory);

// Names of the registered backends, sorted.
std::vector<std::string> RegisteredBackends();

// Connects this rank. Errors: kInvalidArgument for world_size < 1, a rank outside the world, a
// non-positive timeout, a missing store, or both hostname and ifname; kNotFound for a backend that
// is not registered (the message lists the registered ones); the backend's errors (e.g.
// kDeadlineExceeded naming the ranks that never joined the rendezvous).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Connect(ConnectOptions options);

// Reads SHARDKIT_RANK (default 0), SHARDKIT_WORLD_SIZE (default 1), SHARDKIT_LOCAL_RANK (default
// the rank), SHARDKIT_BACKEND (default gloo), SHARDKIT_STORE, SHARDKIT_TIMEOUT (seconds, default
// 60), SHARDKIT_HOSTNAME, SHARDKIT_IFNAME. Errors: kInvalidArgument naming a malformed variable.
[[nodiscard]] absl::StatusOr<ConnectOptions> ConnectOptionsFromEnv();

// Connect(ConnectOptionsFromEnv()).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> ConnectFromEnv();

namespace internal {
// Registers at static-initialization time; aborts on a duplicate name (a build bug).
struct BackendRegistration {
  BackendRegistration(const char* name, BackendFactory factory);
};
}  // namespace internal

}  // namespace shardkit

#define SHARDKIT_REGISTER_BACKEND(name, factory)                                              \
  static const ::shardkit::internal::BackendRegistration shardkit_backend_registration_(name, \
                                                                                        factory)

#endif  // SHARDKIT_CORE_REGISTRY_H_
