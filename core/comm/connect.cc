#include "core/comm/connect.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"
#include "core/comm/backend_loader.h"
#include "core/comm/launcher_env.h"
#include "core/store/rendezvous.h"
#include "core/store/store_url.h"

namespace shardkit {
namespace {

// Connect calls per (store, key prefix, rank) in this process; see ConnectOptions::key_prefix.
struct ConnectCounts {
  std::mutex mu;
  std::map<std::tuple<std::string, std::string, int>, int> counts;  // guarded by mu
};

// The store is named by its URL, or by its address when passed as an object.
std::string NextKeyPrefix(const ConnectOptions& o) {
  const std::string store =
      o.store_url.empty() ? absl::StrCat(reinterpret_cast<uintptr_t>(o.store.get())) : o.store_url;
  static ConnectCounts* connects = new ConnectCounts();
  std::lock_guard<std::mutex> lock(connects->mu);
  const int k = connects->counts[{store, o.key_prefix, o.rank}]++;
  return absl::StrCat(o.key_prefix, "/comm", k);
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

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Connect(ConnectOptions options) {
  SHARDKIT_RETURN_IF_ERROR(Validate(options));
  SHARDKIT_ASSIGN_OR_RETURN(LoadedBackend backend, FindBackendOrPlugin(options.backend));
  return internal::ConnectWithBackend(backend, std::move(options));
}

namespace internal {

absl::StatusOr<std::unique_ptr<Communicator>> ConnectWithBackend(const LoadedBackend& backend,
                                                                 ConnectOptions options) {
  SHARDKIT_RETURN_IF_ERROR(Validate(options));
  options.key_prefix = NextKeyPrefix(options);
  if (options.store == nullptr && !options.store_url.empty()) {
    // Rank 0 serves a tcp:// store itself unless `shardkit launch` already does.
    SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                              OpenStoreAsRank(options.store_url, options.rank, options.timeout));
    options.store = std::move(store);
  }
  if (options.world_size > 1 && BackendNeedsStore(options.backend)) {
    if (options.store == nullptr) {
      return MissingStoreError(DetectLauncherFromEnv().value_or(LauncherEnv()), options);
    }
    // The prefix may hold the keys of an earlier job with the same run id (a finished job's
    // addresses would send this one's ranks to dead ports): this job meets in a fresh
    // generation, which also fails at once, on every rank, if two processes claim one rank.
    SHARDKIT_ASSIGN_OR_RETURN(
        options.key_prefix,
        JoinFreshGeneration(*options.store, options.key_prefix, options.rank, options.world_size,
                            options.launch_id, absl::Now() + options.timeout));
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, backend.factory(options));
  // The communicator's first collective (seq 1): a job mixing two builds fails here, on every
  // rank. Its bytes are not the caller's: the counters start at zero.
  SHARDKIT_RETURN_IF_ERROR(AgreeOnBackendBuild(*comm, backend));
  comm->ResetCounters();
  return comm;
}

}  // namespace internal

absl::StatusOr<ConnectOptions> ConnectOptionsFromEnv() {
  return ConnectOptionsFromEnv([](ConnectOptions&) {});
}

absl::StatusOr<ConnectOptions> ConnectOptionsFromEnv(
    absl::FunctionRef<void(ConnectOptions&)> adjust) {
  SHARDKIT_ASSIGN_OR_RETURN(LauncherEnv launcher, DetectLauncherFromEnv());
  ConnectOptions o;
  o.rank = launcher.rank;
  o.world_size = launcher.world_size;
  o.local_rank = launcher.local_rank;
  if (const char* backend = GetEnv(env::kBackend)) o.backend = backend;
  if (const char* store = GetEnv(env::kStore)) o.store_url = store;
  if (const char* hostname = GetEnv(env::kHostname)) o.hostname = hostname;
  if (const char* ifname = GetEnv(env::kIfname)) o.ifname = ifname;
  if (const char* launch_id = GetEnv(env::kLaunchId)) o.launch_id = launch_id;
  if (const char* timeout = GetEnv(env::kTimeout)) {
    double seconds = 0;
    if (!absl::SimpleAtod(timeout, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(env::kTimeout, "=\"", timeout, "\" is not a positive number of seconds"));
    }
    o.timeout = absl::Seconds(seconds);
  }
  adjust(o);
  SHARDKIT_RETURN_IF_ERROR(CompleteForLauncher(launcher, &o));
  ReportLauncherWarnings(launcher);  // after the errors, which must come first on stderr
  return o;
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectFromEnv() {
  SHARDKIT_ASSIGN_OR_RETURN(ConnectOptions options, ConnectOptionsFromEnv());
  return Connect(std::move(options));
}

}  // namespace shardkit
