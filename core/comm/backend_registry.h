// Backend registry, the plugin side: a communication backend registers a factory under a name
// ("gloo", "nccl") from an alwayslink library, and Connect (connect.h) finds it by that name at
// run time. Programs never include this header: they link //backends:all and call Connect.
//
//   // In a backend library (alwayslink = True), at namespace scope:
//   SHARDKIT_REGISTER_BACKEND("gloo", &CreateGlooCommunicator);
#ifndef SHARDKIT_CORE_COMM_BACKEND_REGISTRY_H_
#define SHARDKIT_CORE_COMM_BACKEND_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"

namespace shardkit {

// Creates one rank's communicator. When Connect calls it, `options.store` is set (for
// world_size > 1) and `options.key_prefix` is final.
using BackendFactory = absl::StatusOr<std::unique_ptr<Communicator>> (*)(const ConnectOptions&);

// Registers `factory` under `name`. Thread-safe. Errors: kAlreadyExists if the name is taken.
[[nodiscard]] absl::Status RegisterBackend(const std::string& name, BackendFactory factory);

// Names of the registered backends, sorted. Thread-safe.
std::vector<std::string> RegisteredBackends();

// The factory registered under `name`. Thread-safe. Errors: kNotFound listing the registered
// backends.
[[nodiscard]] absl::StatusOr<BackendFactory> FindBackend(const std::string& name);

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

#endif  // SHARDKIT_CORE_COMM_BACKEND_REGISTRY_H_
