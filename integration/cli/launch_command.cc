// `shardkit launch`: runs N local ranks of a command with the SHARDKIT_* environment.
// See docs/cli.md and integration/launch/launch.h.
#include <algorithm>
#include <string>
#include <vector>

#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/cli/relaunch.h"
#include "integration/launch/launch.h"
#include "specs/placement.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit launch";

constexpr RankFlagsUse kRanks = {
    .nproc_help = "number of local ranks to start",
    .nproc_required = true,
    .backend_help = "SHARDKIT_BACKEND for every rank",
    .timeout_help = "per-operation deadline in seconds, SHARDKIT_TIMEOUT for every rank",
};

// The launcher's own flags as given; --store and --run-id go straight into `options`.
struct LaunchFlags {
  launch::LaunchOptions options;
  RankFlags ranks{kRanks};
  int64_t world = 0, rank_offset = 0;
  double grace = 5;
};

FlagParser LaunchFlagParser(LaunchFlags* out) {
  FlagParser flags(kCommand,
                   "--nproc N [--backend B] [--store URL] [--timeout S] [--grace S] "
                   "[--world W --rank-offset K] [--run-id ID] -- CMD ARGS...");
  AddRankFlags(flags, &out->ranks, {RankFlag::kNproc, RankFlag::kBackend});
  flags.AddString("store", &out->options.store_url,
                  "file:///dir, redis://host:port[/prefix] or tcp://host:port[/prefix] "
                  "(served by the launcher of rank 0; port 0: a free one, single host); a fresh "
                  "run id is appended (default: a fresh temporary directory, removed afterwards)");
  AddRankFlags(flags, &out->ranks, {RankFlag::kTimeout});
  flags.AddDouble("grace", &out->grace, "seconds the other ranks get after one fails (default 5)");
  flags.AddInt("world", &out->world, "total ranks of a multi-host job (default: --nproc)", 1,
               specs::kMaxWorldSize);
  flags.AddInt("rank-offset", &out->rank_offset,
               "global rank of this host's first rank (default 0)", 0, specs::kMaxWorldSize - 1);
  flags.AddString("run-id", &out->options.run_id,
                  "the job's namespace in --store (default: fresh; multi-host: agreed "
                  "through the store)");
  return flags;
}

// The launch options the parsed and checked `flags` ask for (without the command).
launch::LaunchOptions ToLaunchOptions(const LaunchFlags& flags) {
  launch::LaunchOptions options = flags.options;
  ApplyRankFlags(flags.ranks, options);
  options.world = static_cast<int>(flags.world);
  options.rank_offset = static_cast<int>(flags.rank_offset);
  options.grace = absl::Seconds(flags.grace);
  return options;
}

}  // namespace

int RunLaunch(const std::vector<std::string>& args) {
  // Split at the first `--` here, so that the command's own flags never reach our parser.
  auto separator = std::find(args.begin(), args.end(), "--");
  LaunchFlags flags;
  FlagParser parser = LaunchFlagParser(&flags);
  const ParseResult parsed = ParseCommand(parser, std::vector<std::string>(args.begin(), separator),
                                          Positionals::None(" (put the command after '--')"));
  if (parsed.done()) return parsed.exit_code();
  absl::Status status = CheckRankFlags(parser, &flags.ranks);
  if (status.ok() && separator == args.end()) {
    status = absl::InvalidArgumentError("missing '--' before the command to run");
  }
  if (!status.ok()) return ReportError(kCommand, status);
  launch::LaunchOptions options = ToLaunchOptions(flags);
  options.command.assign(separator + 1, args.end());
  absl::StatusOr<int> exit_code = launch::Launch(options);
  if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
  return *exit_code;
}

}  // namespace shardkit::cli
