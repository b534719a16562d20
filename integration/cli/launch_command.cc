// `shardkit launch`: runs N local ranks of a command with the SHARDKIT_* environment.
// See ARCHITECTURE.md ("The shardkit CLI") and integration/launch/launch.h.
#include <algorithm>
#include <iostream>
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

// Parses the launcher's own flags (everything before `--`) into `options`.
absl::Status ParseLaunchFlags(const std::vector<std::string>& args, launch::LaunchOptions* options,
                              bool* help) {
  FlagParser flags(kCommand,
                   "--nproc N [--backend B] [--store URL] [--timeout S] [--grace S] "
                   "[--world W --rank-offset K] [--run-id ID] -- CMD ARGS...");
  int64_t nproc = 0, world = 0, rank_offset = 0;
  std::string backend;
  double timeout = 0, grace = 5;
  flags.AddInt("nproc", &nproc, "number of local ranks to start (required)", 1, 1 << 16);
  flags.AddString("backend", &backend, "SHARDKIT_BACKEND for every rank (default gloo)");
  flags.AddString("store", &options->store_url,
                  "file:///dir or redis://host:port[/prefix]; a fresh run id is appended "
                  "(default: a fresh temporary directory, removed afterwards)");
  flags.AddDouble("timeout", &timeout, "per-operation deadline in seconds (SHARDKIT_TIMEOUT)");
  flags.AddDouble("grace", &grace, "seconds the other ranks get after one fails (default 5)");
  flags.AddInt("world", &world, "total ranks of a multi-host job (default: --nproc)", 1,
               specs::kMaxWorldSize);
  flags.AddInt("rank-offset", &rank_offset, "global rank of this host's first rank", 0,
               specs::kMaxWorldSize - 1);
  flags.AddString("run-id", &options->run_id,
                  "the job's namespace in --store (default: fresh; multi-host: agreed "
                  "through the store)");
  std::vector<std::string> positional;
  absl::Status parsed = flags.Parse(args, &positional);
  *help = flags.help_requested();
  if (*help) {
    std::cout << flags.Help();
    return absl::OkStatus();
  }
  if (!parsed.ok()) return parsed;
  if (!positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", positional[0], "\" (put the command after '--')"));
  }
  if (!flags.WasSet("nproc")) return absl::InvalidArgumentError("--nproc is required");
  options->nproc = static_cast<int>(nproc);
  options->world = static_cast<int>(world);
  options->rank_offset = static_cast<int>(rank_offset);
  if (flags.WasSet("backend")) options->backend = backend;
  if (flags.WasSet("timeout")) options->timeout_s = timeout;
  options->grace = absl::Seconds(grace);
  return absl::OkStatus();
}

}  // namespace

int RunLaunch(const std::vector<std::string>& args) {
  // Split at the first `--` here, so that the command's own flags never reach our parser.
  auto separator = std::find(args.begin(), args.end(), "--");
  launch::LaunchOptions options;
  bool help = false;
  absl::Status parsed =
      ParseLaunchFlags(std::vector<std::string>(args.begin(), separator), &options, &help);
  if (help && parsed.ok()) return 0;
  if (parsed.ok() && separator == args.end()) {
    parsed = absl::InvalidArgumentError("missing '--' before the command to run");
  }
  if (!parsed.ok()) return ReportError(kCommand, parsed);
  options.command.assign(separator + 1, args.end());
  absl::StatusOr<int> exit_code = launch::Launch(options);
  if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
  return *exit_code;
}

}  // namespace shardkit::cli
