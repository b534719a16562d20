#include "integration/launch/launch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"
#include "core/os/temp_dir.h"
#include "core/store/job_run_id.h"
#include "core/store/store_url.h"
#include "core/store/tcp_store_server.h"

extern char** environ;

namespace shardkit::launch {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// "<kind>-<16 hex digits>", random.
std::string RandomId(const char* kind) {
  std::random_device device;
  uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return absl::StrFormat("%s-%016x", kind, bits);
}

// How long the launcher waits for its store: a tcp:// store may be served by a launcher on
// another host that starts later.
absl::Duration StoreTimeout(const LaunchOptions& options) {
  return options.timeout_s.has_value() ? absl::Seconds(*options.timeout_s) : env::kDefaultTimeout;
}

// The launcher of rank 0 serves a tcp:// --store for the whole run (it needs it before any rank
// exists, for the run id). Port 0 becomes the port chosen, in options->store_url. Null for other
// stores and for the other hosts' launchers, which connect to it.
absl::StatusOr<std::unique_ptr<TcpStoreServer>> ServeTcpStore(LaunchOptions* options) {
  SHARDKIT_ASSIGN_OR_RETURN(StoreUrl url, ParseStoreUrl(options->store_url));
  if (url.kind != StoreUrl::Kind::kTcp || options->rank_offset != 0) return nullptr;
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(url.host, url.port);
  if (!server.ok()) {
    return absl::Status(server.status().code(), absl::StrCat("serving --store ", url.ToString(),
                                                             ": ", server.status().message()));
  }
  url.port = (*server)->port();
  options->store_url = url.ToString();
  return server;
}

// Every launcher of a multi-host job adds its nproc to one counter in the store (JobRunId), so
// all hosts derive the same fresh run id without talking to each other (provided earlier jobs on
// this store were joined completely; --run-id overrides).
absl::StatusOr<std::string> AgreedRunId(const LaunchOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                            OpenStore(options.store_url, StoreTimeout(options)));
  return JobRunId(*store, options.world, options.nproc);
}

absl::StatusOr<std::string> ChooseRunId(const LaunchOptions& options) {
  if (!options.run_id.empty()) return options.run_id;
  if (options.world > options.nproc) return AgreedRunId(options);
  return RandomId("run");
}

std::string EnvOr(const std::vector<std::string>& env, const std::string& name,
                  const std::string& fallback) {
  const std::string prefix = name + "=";
  for (const std::string& entry : env) {
    if (absl::StartsWith(entry, prefix)) return entry.substr(prefix.size());
  }
  return fallback;
}

bool HasVar(const std::vector<std::string>& env, const std::string& name) {
  return EnvOr(env, name, "\x01") != "\x01";
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** var = environ; *var != nullptr; ++var) env.emplace_back(*var);
  return env;
}

}  // namespace

absl::Status ValidateLaunchOptions(const LaunchOptions& options) {
  const int world = options.world == 0 ? options.nproc : options.world;
  if (options.nproc < 1) return Invalid(absl::StrCat("--nproc must be >= 1, got ", options.nproc));
  if (world < 1) return Invalid(absl::StrCat("--world must be >= 1, got ", world));
  if (options.rank_offset < 0) {
    return Invalid(absl::StrCat("--rank-offset must be >= 0, got ", options.rank_offset));
  }
  if (options.rank_offset + options.nproc > world) {
    return Invalid(absl::StrCat("ranks ", options.rank_offset, "..",
                                options.rank_offset + options.nproc - 1,
                                " (--rank-offset + --nproc) do not fit in --world ", world));
  }
  if (!options.store_url.empty()) {
    absl::StatusOr<StoreUrl> url = ParseStoreUrl(options.store_url);
    if (!url.ok()) return Invalid(absl::StrCat("--store: ", url.status().message()));
  }
  if (world > options.nproc && options.store_url.empty()) {
    return Invalid(
        "a multi-host job (--world > --nproc) needs a shared --store redis://... or tcp://...");
  }
  if (world > options.nproc) {
    absl::StatusOr<StoreUrl> url = ParseStoreUrl(options.store_url);
    if (url.ok() && url->kind == StoreUrl::Kind::kTcp && url->port == 0) {
      return Invalid(
          "--store tcp://HOST:0 (any free port) is for a single-host job: the launchers of a "
          "multi-host job (--world > --nproc) must all name the same port");
    }
  }
  if (options.timeout_s.has_value() && !(*options.timeout_s > 0)) {
    return Invalid(absl::StrCat("--timeout must be > 0 seconds, got ", *options.timeout_s));
  }
  if (options.grace < absl::ZeroDuration()) return Invalid("--grace must be >= 0");
  if (options.command.empty() || options.command[0].empty()) {
    return Invalid("missing command after '--'");
  }
  if (absl::StrContains(options.run_id, '/')) return Invalid("--run-id must not contain '/'");
  return absl::OkStatus();
}

std::vector<RankProcessSpec> RankSpecs(const LaunchOptions& options,
                                       const std::vector<std::string>& base,
                                       const std::string& store_url, const std::string& run_id,
                                       const std::string& launch_id) {
  const int world = options.world == 0 ? options.nproc : options.world;
  const std::string backend =
      options.backend.value_or(EnvOr(base, env::kBackend, env::kDefaultBackend));
  const std::string timeout =
      options.timeout_s.has_value()
          ? absl::StrCat(*options.timeout_s)
          : EnvOr(base, env::kTimeout, absl::StrCat(absl::ToInt64Seconds(env::kDefaultTimeout)));
  const bool default_hostname =
      world == options.nproc && !HasVar(base, env::kHostname) && !HasVar(base, env::kIfname);
  const bool progress = !HasVar(base, env::kProgress) && ::isatty(STDERR_FILENO) != 0;
  std::vector<RankProcessSpec> specs;
  for (int local = 0; local < options.nproc; ++local) {
    RankProcessSpec spec;
    spec.rank = options.rank_offset + local;
    const std::vector<std::pair<std::string, std::string>> vars = {
        {env::kRank, absl::StrCat(spec.rank)},
        {env::kLocalRank, absl::StrCat(local)},
        {env::kWorldSize, absl::StrCat(world)},
        {env::kLocalWorldSize, absl::StrCat(options.nproc)},
        {env::kBackend, backend},
        {env::kStore, store_url},
        {env::kRunId, run_id},
        {env::kLaunchId, launch_id},
        {env::kTimeout, timeout},
    };
    for (const std::string& entry : base) {
      bool overridden = false;
      for (const auto& [name, value] : vars) overridden |= absl::StartsWith(entry, name + "=");
      if (!overridden) spec.env.push_back(entry);
    }
    for (const auto& [name, value] : vars) spec.env.push_back(absl::StrCat(name, "=", value));
    if (default_hostname)
      spec.env.push_back(absl::StrCat(env::kHostname, "=", env::kLocalHostname));
    // The ranks' stderr is a pipe to this launcher: pass on whether a person is watching.
    if (progress) spec.env.push_back(absl::StrCat(env::kProgress, "=1"));
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::StatusOr<int> Launch(const LaunchOptions& options) {
  SHARDKIT_RETURN_IF_ERROR(ValidateLaunchOptions(options));
  os::TempDir temp_dir;
  LaunchOptions resolved = options;
  std::unique_ptr<TcpStoreServer> server;  // a tcp:// store, served until the ranks are done
  std::string run_id, store_url;
  if (options.store_url.empty()) {
    SHARDKIT_RETURN_IF_ERROR(temp_dir.Create("shardkit-launch"));
    run_id = RandomId("run");
    store_url = absl::StrCat("file://", temp_dir.path());
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(server, ServeTcpStore(&resolved));
    SHARDKIT_ASSIGN_OR_RETURN(run_id, ChooseRunId(resolved));
    SHARDKIT_ASSIGN_OR_RETURN(store_url, StoreUrlWithSubPrefix(resolved.store_url, run_id));
    // Fail here, once, rather than in every rank: bad path, unreachable server.
    SHARDKIT_RETURN_IF_ERROR(OpenStore(store_url, StoreTimeout(resolved)).status());
  }
  RunOptions run;
  run.command = options.command;
  run.grace = options.grace;
  run.prefix_stdout = options.prefix_stdout;
  run.error_prefix = options.error_prefix;
  SHARDKIT_ASSIGN_OR_RETURN(
      RunOutcome outcome, RunRankProcesses(run, RankSpecs(options, CurrentEnvironment(), store_url,
                                                          run_id, RandomId("launch"))));
  // Ranks of other launches may still be reading how their rendezvous ended (this launch's
  // ranks failing it, say): serve them a while before the store goes.
  if (server != nullptr) (void)server->AwaitNoClients(absl::Now() + options.grace);
  return LaunchExitCode(outcome);
}

}  // namespace shardkit::launch
