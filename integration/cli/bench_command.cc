// `shardkit bench --nproc N --mib M [--strategy scatter|broadcast|raw|copy|reshard|sync] [--repeats
// K]
// [--dtype D] [--params P] [--backend B] [--timeout S]`, and for sync [--sources S] [--same-ranks]
// [--from-dim D] [--to-dim D] [--varied] [--budget-mib B]: launches N local ranks of this binary
// (LaunchSelf, with the hidden flag --rank-worker) that each run integration/bench's RunShardBench
// (RunSyncBench for sync) and print exactly one JSON line; the launcher passes those lines through
// unprefixed, so stdout holds nothing else. Ranks' errors go to stderr, prefixed "[rank R] ".
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "integration/bench/shard_bench.h"
#include "integration/bench/sync_bench.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/cli/relaunch.h"
#include "integration/launch/launch.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit bench";
constexpr char kWorkerFlag[] = "rank-worker";
constexpr char kLaunchedAtFlag[] = "launched-at-us";

constexpr RankFlagsUse kRanks = {.nproc_help = "number of local ranks", .nproc_required = true};

// The flags; CheckBenchFlags turns the strings and --nproc/--backend/--timeout into `launch`
// and `bench`.
struct BenchFlags {
  launch::LaunchOptions launch;
  bench::ShardBenchOptions bench;
  bench::SyncBenchOptions sync;
  bool is_sync = false;
  bool worker = false;
  RankFlags ranks{kRanks};
  int64_t launched_at_us = 0;  // when the launcher started the ranks (Unix microseconds)
  std::string strategy = "scatter", dtype = "float32";
};

FlagParser BenchFlagParser(BenchFlags* out) {
  FlagParser flags(
      kCommand,
      "--nproc N --mib M [--strategy scatter|broadcast|raw|copy|reshard|sync] [--repeats K] "
      "[--dtype D] [--params P] [--backend B] [--timeout S] [--sources S] "
      "[--same-ranks] [--from-dim D] [--to-dim D] [--varied] [--budget-mib B]");
  AddRankFlags(flags, &out->ranks, {RankFlag::kNproc});
  flags.AddInt("mib", &out->bench.mib, "parameter size in MiB (required)", 1, int64_t{1} << 30);
  flags.AddString(
      "strategy", &out->strategy,
      "scatter (default), broadcast, raw (bare backend send/recv: the transport's floor), or copy "
      "(no transport: each rank copies its chunk's bytes on its own device, the memory-copy "
      "floor), or reshard (the parameter scattered by rows once, then resharded to columns each "
      "round), or sync (weight sync from source ranks to destination ranks, repeated, beside a "
      "raw baseline)");
  flags.AddInt("repeats", &out->bench.repeats, "timed rounds (default 5)", 1, 1 << 20);
  flags.AddString("dtype", &out->dtype, "element type (default float32)");
  flags.AddInt("params", &out->bench.params,
               "split --mib over this many parameters and use ShardModule (default 1: "
               "ShardParameter)",
               1, 1 << 20);
  flags.AddInt("sources", &out->sync.sources,
               "sync: ranks 0..S-1 are the sources (default half the world)", 1, 1 << 20);
  flags.AddBool("same-ranks", &out->sync.same_ranks,
                "sync: the destinations are the source ranks themselves (default: the others)");
  flags.AddInt("from-dim", &out->sync.from_dim, "sync: the sources chunk this dim (default 0)", 0,
               1);
  flags.AddInt("to-dim", &out->sync.to_dim, "sync: the destinations chunk this dim (default 1)", 0,
               1);
  flags.AddBool("varied", &out->sync.varied,
                "sync: parameter sizes cycle through 1..12 units instead of being equal");
  flags.AddInt("budget-mib", &out->sync.budget_mib,
               "sync and reshard: staging per rank (SyncOptions::memory_bytes, "
               "ReshardOptions::memory_bytes; default 64)",
               1, 1 << 20);
  AddRankFlags(flags, &out->ranks, {RankFlag::kBackend, RankFlag::kTimeout});
  flags.AddBool(kWorkerFlag, &out->worker, "internal: run as one rank of a launched job");
  flags.AddInt(kLaunchedAtFlag, &out->launched_at_us,
               "internal: when the ranks were launched (Unix microseconds)", 0,
               std::numeric_limits<int64_t>::max());
  return flags;
}

// Errors: kInvalidArgument for a missing --nproc or --mib, a --timeout that is not positive, a
// bad --strategy or --dtype, or options ValidateShardBenchOptions rejects.
absl::Status CheckBenchFlags(const FlagParser& parser, BenchFlags* flags) {
  SHARDKIT_RETURN_IF_ERROR(CheckRankFlags(parser, &flags->ranks));
  SHARDKIT_RETURN_IF_ERROR(Require(parser, {"mib"}));
  SHARDKIT_ASSIGN_OR_RETURN(flags->bench.dtype, ForFlag("dtype", ParseDType(flags->dtype)));
  ApplyRankFlags(flags->ranks, flags->launch);
  if (flags->strategy == "sync") {
    flags->is_sync = true;
    bench::SyncBenchOptions& sync = flags->sync;
    sync.mib = flags->bench.mib;
    sync.params = flags->bench.params;
    sync.repeats = flags->bench.repeats;
    sync.dtype = flags->bench.dtype;
    return bench::ValidateSyncBenchOptions(sync, flags->ranks.nproc);
  }
  SHARDKIT_ASSIGN_OR_RETURN(flags->bench.strategy,
                            ForFlag("strategy", bench::ParseBenchStrategy(flags->strategy)));
  flags->bench.budget_mib = flags->sync.budget_mib;
  return bench::ValidateShardBenchOptions(flags->bench);
}

// One rank: connect from the SHARDKIT_* environment the launcher set, time the start-up (launch
// to the end of the first Barrier), run, print the line.
int RunWorker(const BenchFlags& flags) {
  const bench::ShardBenchOptions& options = flags.bench;
  absl::StatusOr<std::unique_ptr<Communicator>> comm = ConnectFromEnv();
  if (!comm.ok()) return ReportError(kCommand, comm.status());
  if (absl::Status s = (*comm)->Barrier(options.call); !s.ok()) return ReportError(kCommand, s);
  if (flags.is_sync) {
    bench::SyncBenchOptions sync = flags.sync;
    sync.call = options.call;
    absl::StatusOr<bench::SyncBenchResult> result = bench::RunSyncBench(**comm, sync);
    if (!result.ok()) return ReportError(kCommand, result.status());
    std::cout << result->ToJson() << std::endl;
    return 0;
  }
  const int64_t launched_at_us = flags.launched_at_us;
  const double startup_s =
      launched_at_us > 0 ? absl::ToDoubleSeconds(absl::Now() - absl::FromUnixMicros(launched_at_us))
                         : -1;
  absl::StatusOr<bench::ShardBenchResult> result = bench::RunShardBench(**comm, options);
  if (!result.ok()) return ReportError(kCommand, result.status());
  result->startup_s = startup_s;
  std::cout << result->ToJson() << std::endl;
  return 0;
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  BenchFlags flags;
  FlagParser parser = BenchFlagParser(&flags);
  const ParseResult parsed = ParseCommand(parser, args, Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = CheckBenchFlags(parser, &flags); !s.ok()) return ReportError(kCommand, s);
  if (flags.worker) return RunWorker(flags);
  flags.launch.prefix_stdout = false;
  std::vector<std::string> rank_args = {"bench"};
  rank_args.insert(rank_args.end(), args.begin(), args.end());
  rank_args.push_back(absl::StrCat("--", kWorkerFlag));
  rank_args.push_back(absl::StrCat("--", kLaunchedAtFlag, "=", absl::ToUnixMicros(absl::Now())));
  absl::StatusOr<int> exit_code = LaunchSelf(flags.launch, rank_args);
  if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
  return *exit_code;
}

}  // namespace shardkit::cli
