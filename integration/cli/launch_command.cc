// `shardkit launch`: runs N local ranks of a command with the SHARDKIT_* environment.
// See docs/cli.md and integration/launch/launch.h.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/launch/launch.h"
#include "specs/placement.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit launch";

// The launcher's own flags as given; --store and --run-id go straight into `options`.
struct LaunchFlags {
  launch::LaunchOptions options;
  int64_t nproc = 0, world = 0, rank_offset = 0;
  std::string backend;
  double timeout = 0, grace = 5;
};

FlagParser LaunchFlagParser(LaunchFlags* out) {
  FlagParser flags(kCommand,
                   "--nproc N [--backend B] [--store URL] [--timeout S] [--grace S] "
                   "[--world W --rank-offset K] [--run-id ID] -- CMD ARGS...");
  flags.AddInt("nproc", &out->nproc, "number of local ranks to start (required)", 1, 1 << 16);
  flags.AddString("backend", &out->backend,
                  absl::StrCat("SHARDKIT_BACKEND for every rank ", BackendDefaultHelp()));
  flags.AddString("store", &out->options.store_url,
                  "file:///dir, redis://host:port[/prefix] or tcp://host:port[/prefix] "
                  "(served by the launcher of rank 0; port 0: a free one, single host); a fresh "
                  "run id is appended (default: a fresh temporary directory, removed afterwards)");
  flags.AddDouble("timeout", &out->timeout,
                  absl::StrCat("per-operation deadline in seconds, SHARDKIT_TIMEOUT for every "
                               "rank ",
                               TimeoutDefaultHelp()));
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

// The launch options the parsed `flags` ask for (without the command).
launch::LaunchOptions ToLaunchOptions(const FlagParser& parser, const LaunchFlags& flags) {
  launch::LaunchOptions options = flags.options;
  options.nproc = static_cast<int>(flags.nproc);
  options.world = static_cast<int>(flags.world);
  options.rank_offset = static_cast<int>(flags.rank_offset);
  if (parser.WasSet("backend")) options.backend = flags.backend;
  if (parser.WasSet("timeout")) options.timeout_s = flags.timeout;
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
  absl::Status status = Require(parser, {"nproc"});
  if (status.ok() && separator == args.end()) {
    status = absl::InvalidArgumentError("missing '--' before the command to run");
  }
  if (!status.ok()) return ReportError(kCommand, status);
  launch::LaunchOptions options = ToLaunchOptions(parser, flags);
  options.command.assign(separator + 1, args.end());
  absl::StatusOr<int> exit_code = launch::Launch(options);
  if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
  return *exit_code;
}

}  // namespace shardkit::cli
