// `shardkit shard --plan PLAN.json --checkpoint IN.safetensors --out DIR [--src-rank R]
// [--strategy scatter|broadcast] [--nproc N] [--backend B] [--timeout S]`.
//
// With --nproc N it is exactly `shardkit launch --nproc N -- shardkit shard <the other
// arguments>`; under a launcher (SHARDKIT_RANK set) it is one rank and --nproc is an error; with
// neither it runs as a world of one. The work is checkpoint::ShardCheckpoint.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/cli/relaunch.h"
#include "integration/launch/launch.h"
#include "specs/placement.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit shard";

struct ShardFlags {
  checkpoint::ShardCheckpointOptions options;
  std::optional<int64_t> nproc;
  std::optional<std::string> backend;
  std::optional<double> timeout_s;
};

absl::Status Require(const FlagParser& flags, const char* name) {
  if (flags.WasSet(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", name, " is required (see --help)"));
}

// Parses the flags; returns nullopt after printing --help.
absl::StatusOr<std::optional<ShardFlags>> ParseShardFlags(const std::vector<std::string>& args) {
  FlagParser flags(kCommand,
                   "--plan PLAN.json --checkpoint IN.safetensors --out DIR [--src-rank R] "
                   "[--strategy scatter|broadcast] [--nproc N] [--backend B] [--timeout S]");
  ShardFlags out;
  int64_t src_rank = 0, nproc = 0;
  std::string strategy, backend;
  double timeout = 0;
  flags.AddString("plan", &out.options.plan_path, "JSON plan: which spec each parameter gets");
  flags.AddString("checkpoint", &out.options.checkpoint_path,
                  "safetensors checkpoint (read by the source rank only)");
  flags.AddString("out", &out.options.out_dir,
                  "output directory: rank-RRRRR.safetensors per rank and index.json");
  flags.AddInt("src-rank", &src_rank, "the rank that reads the checkpoint (beats the plan)", 0,
               specs::kMaxRank);
  flags.AddString("strategy", &strategy, "scatter or broadcast (beats the plan)");
  flags.AddInt("nproc", &nproc, "run N local ranks (as `shardkit launch --nproc N`)", 1, 1 << 16);
  flags.AddString("backend", &backend, "communication backend (beats SHARDKIT_BACKEND)");
  flags.AddDouble("timeout", &timeout,
                  "deadline of the whole run in seconds (beats SHARDKIT_TIMEOUT)");
  std::vector<std::string> positional;
  absl::Status parsed = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return std::optional<ShardFlags>();
  }
  SHARDKIT_RETURN_IF_ERROR(parsed);
  if (!positional.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", positional[0], "\""));
  }
  for (const char* name : {"plan", "checkpoint", "out"}) {
    SHARDKIT_RETURN_IF_ERROR(Require(flags, name));
  }
  if (flags.WasSet("src-rank")) out.options.src_rank = src_rank;
  if (flags.WasSet("strategy")) {
    SHARDKIT_ASSIGN_OR_RETURN(out.options.strategy, specs::ParseStrategy(strategy));
  }
  if (flags.WasSet("nproc")) out.nproc = nproc;
  if (flags.WasSet("backend")) out.backend = backend;
  if (flags.WasSet("timeout")) {
    if (!(timeout > 0)) return absl::InvalidArgumentError("--timeout must be > 0 seconds");
    out.timeout_s = timeout;
  }
  return std::optional<ShardFlags>(std::move(out));
}

// `args` without --nproc and its value.
std::vector<std::string> WithoutNproc(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (!absl::StartsWith(args[i], "--nproc=")) out.push_back(args[i]);
  }
  return out;
}

// --nproc N: `shardkit launch --nproc N -- shardkit shard <the other arguments>`.
absl::StatusOr<int> LaunchRanks(const std::vector<std::string>& args, int64_t nproc) {
  if (UnderLauncher()) {
    return absl::InvalidArgumentError(
        "--nproc cannot be used under a launcher (SHARDKIT_RANK is set): each rank runs "
        "'shardkit shard' without it");
  }
  launch::LaunchOptions options;
  options.nproc = static_cast<int>(nproc);
  std::vector<std::string> rank_args = {"shard"};
  for (std::string& arg : WithoutNproc(args)) rank_args.push_back(std::move(arg));
  // The ranks' stderr is a pipe to the launcher: pass on whether a person is watching.
  if (::isatty(STDERR_FILENO)) ::setenv("SHARDKIT_PROGRESS", "1", /*overwrite=*/0);
  return LaunchSelf(options, rank_args);
}

absl::Status RunRank(const ShardFlags& flags) {
  SHARDKIT_ASSIGN_OR_RETURN(ConnectOptions connect, ConnectOptionsFromEnv());
  if (flags.backend) connect.backend = *flags.backend;
  if (flags.timeout_s) connect.timeout = absl::Seconds(*flags.timeout_s);
  // One deadline for the whole run: rendezvous, every collective step and the commit share it.
  const absl::Time deadline = absl::Now() + connect.timeout;
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Connect(connect));
  checkpoint::ShardCheckpointOptions options = flags.options;
  options.call.deadline = deadline;
  const char* progress = std::getenv("SHARDKIT_PROGRESS");
  options.progress = progress != nullptr ? std::string(progress) == "1" : ::isatty(STDERR_FILENO);
  return checkpoint::ShardCheckpoint(options, *comm, std::cerr);
}

}  // namespace

int RunShard(const std::vector<std::string>& args) {
  absl::StatusOr<std::optional<ShardFlags>> flags = ParseShardFlags(args);
  if (!flags.ok()) return ReportError(kCommand, flags.status());
  if (!flags->has_value()) return 0;  // --help
  if ((*flags)->nproc) {
    absl::StatusOr<int> exit_code = LaunchRanks(args, *(*flags)->nproc);
    if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
    return *exit_code;
  }
  absl::Status status = RunRank(**flags);
  if (!status.ok()) return ReportError(kCommand, status);
  return 0;
}

}  // namespace shardkit::cli
