#include "core/comm/launcher_env.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"
#include "core/store/job_run_id.h"
#include "core/store/store_url.h"

namespace shardkit {
namespace {

// The variables one launcher sets.
struct LauncherVars {
  Launcher launcher;
  const char* name;    // in messages
  const char* marker;  // must be set for the launcher to count; nullptr: none
  const char* rank;
  const char* world;
  const char* local_rank;
};

constexpr LauncherVars kShardkitVars = {Launcher::kShardkit, "shardkit launch", nullptr,
                                        env::kRank,          env::kWorldSize,   env::kLocalRank};

// Innermost first: torchrun is started by srun or mpirun, mpirun inside a Slurm allocation.
constexpr LauncherVars kOtherLaunchers[] = {
    {Launcher::kTorchrun, "torchrun", env::kTorchrunRunId, env::kTorchrunRank,
     env::kTorchrunWorldSize, env::kTorchrunLocalRank},
    {Launcher::kOpenMpi, "Open MPI", nullptr, env::kOmpiRank, env::kOmpiWorldSize,
     env::kOmpiLocalRank},
    {Launcher::kSlurm, "Slurm srun", env::kSlurmStepId, env::kSlurmRank, env::kSlurmWorldSize,
     env::kSlurmLocalRank},
};

// torchrun's TORCHELASTIC_RUN_ID when no --rdzv-id is given: the same for every run.
constexpr char kTorchrunDefaultRunId[] = "none";

const char* Get(const EnvLookup& lookup, const char* name) {
  const char* value = lookup(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

bool Present(const LauncherVars& v, const EnvLookup& lookup) {
  if (v.marker != nullptr && Get(lookup, v.marker) == nullptr) return false;
  return Get(lookup, v.rank) != nullptr || Get(lookup, v.world) != nullptr;
}

// The integer in `name`; `fallback` when unset (none: the variable is required).
absl::StatusOr<int> IntVar(const EnvLookup& lookup, const LauncherVars& v, const char* name,
                           std::optional<int> fallback) {
  const char* text = Get(lookup, name);
  if (text == nullptr) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is unset, but other variables of ", v.name, " are set"));
  }
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=\"", text, "\" is not an integer (", v.name, ")"));
  }
  return value;
}

absl::Status CheckInWorld(const LauncherVars& v, const char* name, int value, int world,
                          const std::string& world_text) {
  if (value >= 0 && value < world) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, "=", value, " is outside 0..", world - 1,
                                                 ", the ranks of ", world_text, " (", v.name, ")"));
}

// The launcher's own name for the run, checked to be usable as a store namespace.
absl::StatusOr<std::string> RunId(Launcher launcher, const EnvLookup& lookup) {
  std::string id, source;
  if (const char* chosen = Get(lookup, env::kRunId)) {
    id = chosen;
    source = env::kRunId;
  } else if (launcher == Launcher::kTorchrun) {
    id = Get(lookup, env::kTorchrunRunId);  // the marker: set
    if (id == kTorchrunDefaultRunId) return std::string();
    source = env::kTorchrunRunId;
    const char* restart = Get(lookup, env::kTorchrunRestartCount);
    if (restart != nullptr && std::string(restart) != "0") {
      absl::StrAppend(&id, ".restart", restart);
      absl::StrAppend(&source, ", ", env::kTorchrunRestartCount);
    }
  } else if (launcher == Launcher::kSlurm && Get(lookup, env::kSlurmJobId) != nullptr) {
    id = absl::StrCat(Get(lookup, env::kSlurmJobId), ".", Get(lookup, env::kSlurmStepId));
    source = absl::StrCat(env::kSlurmJobId, ", ", env::kSlurmStepId);
  }
  if (absl::StrContains(id, '/')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run id \"", id, "\" (from ", source, ") contains '/' and cannot name a store namespace"));
  }
  return id;
}

absl::StatusOr<LauncherEnv> Parse(const LauncherVars& v, const EnvLookup& lookup) {
  // `shardkit launch`'s variables keep their defaults (rank 0, world 1); the others are required.
  const bool own = v.launcher == Launcher::kShardkit;
  LauncherEnv out;
  out.launcher = v.launcher;
  SHARDKIT_ASSIGN_OR_RETURN(out.world_size,
                            IntVar(lookup, v, v.world, own ? std::optional<int>(1) : std::nullopt));
  SHARDKIT_ASSIGN_OR_RETURN(out.rank,
                            IntVar(lookup, v, v.rank, own ? std::optional<int>(0) : std::nullopt));
  SHARDKIT_ASSIGN_OR_RETURN(out.local_rank, IntVar(lookup, v, v.local_rank, out.rank));
  const std::string world_text = Get(lookup, v.world) != nullptr
                                     ? absl::StrCat(v.world, "=", out.world_size)
                                     : absl::StrCat(v.world, " unset: 1");
  if (out.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(world_text, " is not a world size, which is at least 1 (", v.name, ")"));
  }
  SHARDKIT_RETURN_IF_ERROR(CheckInWorld(v, v.rank, out.rank, out.world_size, world_text));
  SHARDKIT_RETURN_IF_ERROR(
      CheckInWorld(v, v.local_rank, out.local_rank, out.world_size, world_text));
  out.description =
      absl::StrCat(v.name, " (", v.rank, "=", out.rank, ", ", v.world, "=", out.world_size, ")");
  SHARDKIT_ASSIGN_OR_RETURN(out.run_id, RunId(v.launcher, lookup));
  return out;
}

// Adds a warning to `used` when the outer launcher `outer` says something else.
void CompareOuter(const LauncherVars& outer, const EnvLookup& lookup, LauncherEnv* used) {
  absl::StatusOr<LauncherEnv> theirs = Parse(outer, lookup);
  if (!theirs.ok()) {
    used->warnings.push_back(absl::StrCat("using ", used->description,
                                          "; ignoring the outer launcher ", outer.name, ": ",
                                          theirs.status().message()));
    return;
  }
  if (theirs->world_size == 1) return;  // no launcher (`srun --pty bash`)
  if (theirs->rank == used->rank && theirs->world_size == used->world_size) return;
  used->warnings.push_back(absl::StrCat("using ", used->description,
                                        "; the outer launcher differs: ", theirs->description));
}

// The run id ranks without one from their launcher agree on: once per process and store, since
// every call counts this rank as joining another job.
absl::StatusOr<std::string> AgreedRunId(const std::string& store_url, int world) {
  struct Agreed {
    std::mutex mu;
    std::map<std::pair<std::string, int>, std::string> ids;  // guarded by mu
  };
  static Agreed* agreed = new Agreed();
  std::lock_guard<std::mutex> lock(agreed->mu);
  auto it = agreed->ids.find({store_url, world});
  if (it != agreed->ids.end()) return it->second;
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(store_url));
  SHARDKIT_ASSIGN_OR_RETURN(std::string id, JobRunId(*store, world, 1));
  agreed->ids.emplace(std::make_pair(store_url, world), id);
  return id;
}

absl::Status HostNameError(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": set ", env::kHostname,
                                                    " (an address of this host the other ranks "
                                                    "reach) or ",
                                                    env::kIfname, " (its interface)"));
}

// The numeric address this host's name resolves to (the first one getaddrinfo gives).
absl::StatusOr<std::string> HostAddress() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) {
    return HostNameError(absl::StrCat("cannot read this host's name: ", std::strerror(errno)));
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(name, nullptr, &hints, &found);
  if (rc != 0) {
    return HostNameError(
        absl::StrCat("this host's name \"", name, "\" does not resolve: ", gai_strerror(rc)));
  }
  char address[NI_MAXHOST] = {};
  rc = getnameinfo(found->ai_addr, found->ai_addrlen, address, sizeof(address), nullptr, 0,
                   NI_NUMERICHOST);
  freeaddrinfo(found);
  if (rc != 0) {
    return HostNameError(absl::StrCat("cannot print the address of this host's name \"", name,
                                      "\": ", gai_strerror(rc)));
  }
  return std::string(address);
}

}  // namespace

absl::Status MissingStoreError(const LauncherEnv& launcher, const ConnectOptions& options) {
  if (launcher.launcher == Launcher::kNone || launcher.launcher == Launcher::kShardkit) {
    return absl::InvalidArgumentError(absl::StrCat("a world of ", options.world_size,
                                                   " ranks needs a store (", env::kStore,
                                                   " or store_url)"));
  }
  const std::string& backend = options.backend;
  std::string message = absl::StrCat(launcher.description, " started this rank, and backend ",
                                     backend, " needs a rendezvous store every rank reaches: set ",
                                     env::kStore, " (file:///shared/dir or redis://host:port)");
  if (launcher.launcher == Launcher::kTorchrun) {
    absl::StrAppend(&message, "; torchrun's own store on MASTER_PORT is not one shardkit can use");
  }
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<LauncherEnv> DetectLauncher(const EnvLookup& lookup) {
  if (Present(kShardkitVars, lookup)) return Parse(kShardkitVars, lookup);
  const LauncherVars* inner = std::begin(kOtherLaunchers);
  while (inner != std::end(kOtherLaunchers) && !Present(*inner, lookup)) ++inner;
  if (inner == std::end(kOtherLaunchers)) return LauncherEnv();
  SHARDKIT_ASSIGN_OR_RETURN(LauncherEnv used, Parse(*inner, lookup));
  for (const LauncherVars* outer = inner + 1; outer != std::end(kOtherLaunchers); ++outer) {
    if (Present(*outer, lookup)) CompareOuter(*outer, lookup, &used);
  }
  if (used.world_size > 1) return used;
  LauncherEnv none;  // a world of one is no launcher
  none.warnings = std::move(used.warnings);
  return none;
}

absl::StatusOr<LauncherEnv> DetectLauncherFromEnv() {
  return DetectLauncher([](const char* name) { return std::getenv(name); });
}

bool BackendNeedsStore(std::string_view backend) { return backend != "mpi"; }

absl::Status CompleteForLauncher(const LauncherEnv& launcher, ConnectOptions* options) {
  // Without a store there is nothing to do here; Connect reports it if the backend needs one
  // (the backend may still change: a --backend flag is applied after the environment).
  if (launcher.launcher == Launcher::kNone || launcher.launcher == Launcher::kShardkit ||
      !BackendNeedsStore(options->backend) || options->store_url.empty()) {
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(StoreUrl url, ParseStoreUrl(options->store_url));
  std::string run_id = launcher.run_id;
  // A tcp:// store rank 0 serves (in Connect) holds this run's keys only, and nobody serves it
  // yet to agree through: without a run id from the launcher it needs no namespace.
  if (run_id.empty() && url.kind != StoreUrl::Kind::kTcp) {
    SHARDKIT_ASSIGN_OR_RETURN(run_id, AgreedRunId(options->store_url, launcher.world_size));
  }
  if (!run_id.empty()) {
    SHARDKIT_ASSIGN_OR_RETURN(options->store_url,
                              StoreUrlWithSubPrefix(options->store_url, run_id));
  }
  if (options->hostname.empty() && options->ifname.empty()) {
    SHARDKIT_ASSIGN_OR_RETURN(options->hostname, HostAddress());
  }
  return absl::OkStatus();
}

void ReportLauncherWarnings(const LauncherEnv& launcher) {
  static std::once_flag once;
  std::call_once(once, [&launcher] {
    for (const std::string& warning : launcher.warnings) {
      std::cerr << "shardkit: warning: " << warning << "\n";
    }
    std::cerr << std::flush;
  });
}

}  // namespace shardkit
