// `shardkit bench --nproc N --mib M [--strategy scatter|broadcast|raw] [--repeats K] [--dtype D]
// [--params P] [--backend B] [--timeout S]`: launches N local ranks of this binary (LaunchSelf,
// with the hidden flag --rank-worker) that each run integration/bench's RunShardBench and print
// exactly one JSON line; the launcher passes those lines through unprefixed, so stdout holds
// nothing else. Ranks' errors go to stderr, prefixed "[rank R] ".
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/registry.h"
#include "integration/bench/shard_bench.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/cli/relaunch.h"
#include "integration/launch/launch.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit bench";
constexpr char kWorkerFlag[] = "rank-worker";

struct BenchFlags {
  launch::LaunchOptions launch;
  bench::ShardBenchOptions bench;
  bool worker = false;
  bool help = false;
};

absl::Status ParseBenchFlags(const std::vector<std::string>& args, BenchFlags* out) {
  FlagParser flags(kCommand,
                   "--nproc N --mib M [--strategy scatter|broadcast|raw] [--repeats K] "
                   "[--dtype D] [--params P] [--backend B] [--timeout S]");
  int64_t nproc = 0;
  std::string strategy = "scatter", dtype = "float32", backend;
  double timeout = 0;
  flags.AddInt("nproc", &nproc, "number of local ranks (required)", 1, 1 << 16);
  flags.AddInt("mib", &out->bench.mib, "parameter size in MiB (required)", 1, int64_t{1} << 30);
  flags.AddString("strategy", &strategy, "scatter (default), broadcast, or raw (the floor)");
  flags.AddInt("repeats", &out->bench.repeats, "timed rounds (default 5)", 1, 1 << 20);
  flags.AddString("dtype", &dtype, "element type (default float32)");
  flags.AddInt("params", &out->bench.params,
               "split --mib over this many parameters and use ShardModule (default 1: "
               "ShardParameter)",
               1, 1 << 20);
  flags.AddString("backend", &backend, "communication backend (default gloo)");
  flags.AddDouble("timeout", &timeout, "per-operation deadline in seconds (SHARDKIT_TIMEOUT)");
  flags.AddBool(kWorkerFlag, &out->worker, "internal: run as one rank of a launched job");
  std::vector<std::string> positional;
  absl::Status parsed = flags.Parse(args, &positional);
  out->help = flags.help_requested();
  if (out->help) {
    std::cout << flags.Help();
    return absl::OkStatus();
  }
  if (!parsed.ok()) return parsed;
  if (!positional.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", positional[0], "\""));
  }
  if (!flags.WasSet("nproc")) return absl::InvalidArgumentError("--nproc is required");
  if (!flags.WasSet("mib")) return absl::InvalidArgumentError("--mib is required");
  absl::StatusOr<bench::BenchStrategy> parsed_strategy = bench::ParseBenchStrategy(strategy);
  if (!parsed_strategy.ok()) return parsed_strategy.status();
  out->bench.strategy = *parsed_strategy;
  absl::StatusOr<DType> parsed_dtype = ParseDType(dtype);
  if (!parsed_dtype.ok()) return parsed_dtype.status();
  out->bench.dtype = *parsed_dtype;
  out->launch.nproc = static_cast<int>(nproc);
  if (flags.WasSet("backend")) out->launch.backend = backend;
  if (flags.WasSet("timeout")) out->launch.timeout_s = timeout;
  return bench::ValidateShardBenchOptions(out->bench);
}

// One rank: connect from the SHARDKIT_* environment the launcher set, run, print the line.
int RunWorker(const bench::ShardBenchOptions& options) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = ConnectFromEnv();
  if (!comm.ok()) return ReportError(kCommand, comm.status());
  absl::StatusOr<bench::ShardBenchResult> result = bench::RunShardBench(**comm, options);
  if (!result.ok()) return ReportError(kCommand, result.status());
  std::cout << result->ToJson() << std::endl;
  return 0;
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  BenchFlags flags;
  absl::Status parsed = ParseBenchFlags(args, &flags);
  if (flags.help && parsed.ok()) return 0;
  if (!parsed.ok()) return ReportError(kCommand, parsed);
  if (flags.worker) return RunWorker(flags.bench);
  flags.launch.prefix_stdout = false;
  std::vector<std::string> rank_args = {"bench"};
  rank_args.insert(rank_args.end(), args.begin(), args.end());
  rank_args.push_back(absl::StrCat("--", kWorkerFlag));
  absl::StatusOr<int> exit_code = LaunchSelf(flags.launch, rank_args);
  if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
  return *exit_code;
}

}  // namespace shardkit::cli
