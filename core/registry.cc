#include "core/registry.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/check.h"
#include "core/status_macros.h"
#include "core/store_url.h"

namespace shardkit {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;  // guarded by mu
  // Connect calls per (key prefix, rank) in this process; see ConnectOptions::key_prefix.
  std::map<std::pair<std::string, int>, int> connects;  // guarded by mu
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

absl::StatusOr<BackendFactory> FindBackend(const std::string& name) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.factories.find(name);
  if (it != registry.factories.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [n, f] : registry.factories) names.push_back(n);
  return absl::NotFoundError(
      absl::StrCat("backend \"", name, "\" is not built into this program; available: ",
                   names.empty() ? std::string("none") : absl::StrJoin(names, ", ")));
}

std::string NextKeyPrefix(const std::string& prefix, int rank) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  const int k = registry.connects[{prefix, rank}]++;
  return absl::StrCat(prefix, "/comm", k);
}

absl::Status Validate(const ConnectOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size must be at least 1, got ", o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", o.rank, " is outside a world of ",
                                                   o.world_size, " ranks (0..", o.world_size - 1,
                                                   ")"));
  }
  if (o.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout must be positive, got ", absl::FormatDuration(o.timeout)));
  }
  if (!o.hostname.empty() && !o.ifname.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("set a hostname (", o.hostname,
                                                   ") or an interface (", o.ifname, "), not both"));
  }
  return absl::OkStatus();
}

const char* GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

absl::StatusOr<int> IntFromEnv(const char* name, int fallback) {
  const char* text = GetEnv(name);
  if (text == nullptr) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=\"", text, "\" is not an integer"));
  }
  return value;
}

}  // namespace

absl::Status RegisterBackend(const std::string& name, BackendFactory factory) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (!registry.factories.emplace(name, factory).second) {
    return absl::AlreadyExistsError(absl::StrCat("backend \"", name, "\" is registered twice"));
  }
  return absl::OkStatus();
}

std::vector<std::string> RegisteredBackends() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry.factories) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(ConnectOptions options) {
  SHARDKIT_RETURN_IF_ERROR(Validate(options));
  SHARDKIT_ASSIGN_OR_RETURN(BackendFactory factory, FindBackend(options.backend));
  if (options.store == nullptr && !options.store_url.empty()) {
    SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(options.store_url));
    options.store = std::move(store);
  }
  if (options.store == nullptr && options.world_size > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a world of ", options.world_size, " ranks needs a store (SHARDKIT_STORE or store_url)"));
  }
  options.key_prefix = NextKeyPrefix(options.key_prefix, options.rank);
  return factory(options);
}

absl::StatusOr<ConnectOptions> ConnectOptionsFromEnv() {
  ConnectOptions o;
  SHARDKIT_ASSIGN_OR_RETURN(o.rank, IntFromEnv("SHARDKIT_RANK", 0));
  SHARDKIT_ASSIGN_OR_RETURN(o.world_size, IntFromEnv("SHARDKIT_WORLD_SIZE", 1));
  SHARDKIT_ASSIGN_OR_RETURN(o.local_rank, IntFromEnv("SHARDKIT_LOCAL_RANK", o.rank));
  if (const char* backend = GetEnv("SHARDKIT_BACKEND")) o.backend = backend;
  if (const char* store = GetEnv("SHARDKIT_STORE")) o.store_url = store;
  if (const char* hostname = GetEnv("SHARDKIT_HOSTNAME")) o.hostname = hostname;
  if (const char* ifname = GetEnv("SHARDKIT_IFNAME")) o.ifname = ifname;
  if (const char* timeout = GetEnv("SHARDKIT_TIMEOUT")) {
    double seconds = 0;
    if (!absl::SimpleAtod(timeout, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("SHARDKIT_TIMEOUT=\"", timeout, "\" is not a positive number of seconds"));
    }
    o.timeout = absl::Seconds(seconds);
  }
  return o;
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectFromEnv() {
  SHARDKIT_ASSIGN_OR_RETURN(ConnectOptions options, ConnectOptionsFromEnv());
  return Connect(std::move(options));
}

namespace internal {

BackendRegistration::BackendRegistration(const char* name, BackendFactory factory) {
  absl::Status status = RegisterBackend(name, factory);
  SHARDKIT_CHECK(status.ok()) << status.ToString();
}

}  // namespace internal
}  // namespace shardkit
