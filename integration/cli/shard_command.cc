// `shardkit shard --plan PLAN.json --checkpoint IN.safetensors --out DIR [--src-rank R]
// [--strategy scatter|broadcast|direct] [--memory-mib M] [--fp8-block B]
// [--allow-misaligned-scales] [--strict] [--format shardkit|dcp] [--nproc N] [--backend B]
// [--timeout S]` and
// `shardkit reshard --in DIR --plan PLAN.json --out DIR2` with the same flags but --src-rank and
// --strategy.
//
// With --nproc N each is exactly `shardkit launch --nproc N -- shardkit shard|reshard <the other
// arguments>`; under a launcher (UnderLauncher: shardkit launch, torchrun, mpirun, srun) it is
// one rank and --nproc is an error; with neither it runs as a world of one. The work is
// checkpoint::ShardCheckpoint (reshard: checkpoint::ReshardCheckpoint, the input a shard
// directory); the source rank prints its report as the summary on stderr (run_summary.h).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "integration/checkpoint/reshard_checkpoint.h"
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/cli/relaunch.h"
#include "integration/launch/launch.h"
#include "integration/report/run_summary.h"
#include "specs/placement.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit shard";
constexpr char kReshardCommand[] = "shardkit reshard";

constexpr RankFlagsUse kRanks = {
    .nproc_help =
        "run N local ranks, as `shardkit launch --nproc N` (default: one rank of the "
        "launcher this runs under, else a world of one)",
    .timeout_help = "deadline of the whole run in seconds",
};

// The flags as given; CheckShardFlags moves --src-rank and --strategy into `options`.
struct ShardFlags {
  checkpoint::ShardCheckpointOptions options;
  int64_t src_rank = 0, memory_mib = kDefaultMemoryMib;
  std::string strategy, format;
  RankFlags ranks{kRanks};
  bool reshard = false;  // `shardkit reshard`: --in is options.checkpoint_path
};

// The flags both commands share: --memory-mib, --fp8-block, --allow-misaligned-scales, --strict,
// --nproc, --backend, --timeout.
void AddRunFlags(FlagParser& flags, ShardFlags* out) {
  AddMemoryFlag(flags, &out->memory_mib);
  AddFp8Flags(flags, &out->options.write.fp8.block, &out->options.write.fp8.allow_misaligned);
  AddStrictFlag(flags, &out->options.write.strict, &out->options.write.allow_replicated_only);
  AddFormatFlag(flags, &out->format,
                "shardkit (rank-RRRRR.safetensors per rank and index.json) or dcp (a PyTorch DCP "
                "checkpoint that torch's dcp.load reads: __R_0.distcp per rank and .metadata) "
                "(default: shardkit)");
  AddRankFlags(flags, &out->ranks);
}

FlagParser ShardFlagParser(ShardFlags* out) {
  FlagParser flags(kCommand,
                   "--plan PLAN.json --checkpoint IN.safetensors --out DIR [--src-rank R] "
                   "[--strategy scatter|broadcast|direct] [--memory-mib M] [--fp8-block B] "
                   "[--allow-misaligned-scales] [--strict] [--allow-replicated-only] "
                   "[--format shardkit|dcp] [--nproc N] [--backend B] [--timeout S]");
  flags.AddString("plan", &out->options.write.plan_path,
                  "JSON plan: which spec each parameter gets (required; below)");
  flags.AddString("checkpoint", &out->options.checkpoint_path,
                  "a .safetensors file, a Hugging Face *.safetensors.index.json, or a directory "
                  "holding one (read by the source rank only; under --strategy direct by every "
                  "rank, at this same path) (required)");
  flags.AddString("out", &out->options.write.out_dir,
                  "output directory: rank-RRRRR.safetensors per rank and index.json, or with "
                  "--format dcp a DCP checkpoint (required)");
  flags.AddInt("src-rank", &out->src_rank,
               "the rank that reads the checkpoint (default: the plan's src_rank, else 0)", 0,
               specs::kMaxRank);
  flags.AddString("strategy", &out->strategy,
                  "scatter (the source sends each rank its shards), broadcast (every rank gets "
                  "everything), or direct (every rank reads its own shards from the checkpoint; "
                  "no tensor data crosses the network) (default: the plan's strategy, else "
                  "scatter)");
  AddRunFlags(flags, out);
  flags.SetHelpNotes(kPlanHelp);
  return flags;
}

FlagParser ReshardFlagParser(ShardFlags* out) {
  FlagParser flags(kReshardCommand,
                   "--in DIR --plan PLAN.json --out DIR2 [--include GLOB]... [--exclude GLOB]... "
                   "[--memory-mib M] [--fp8-block B] [--allow-misaligned-scales] [--strict] "
                   "[--allow-replicated-only] [--format shardkit|dcp] [--nproc N] [--backend B] "
                   "[--timeout S]");
  flags.AddString("in", &out->options.checkpoint_path,
                  "the shard directory, or PyTorch DCP checkpoint directory, to re-lay out (read "
                  "by every rank, at this same path) (required)");
  flags.AddString("plan", &out->options.write.plan_path,
                  "JSON plan: which spec each parameter gets; its src_rank and strategy are "
                  "ignored (required; below)");
  flags.AddString("out", &out->options.write.out_dir,
                  "output directory (outside --in): rank-RRRRR.safetensors per rank and "
                  "index.json, or with --format dcp a DCP checkpoint (required)");
  AddSelectionFlags(flags, &out->options.write.select, /*strip_prefix=*/false);
  AddRunFlags(flags, out);
  flags.SetHelpNotes(kPlanHelp);
  out->reshard = true;
  return flags;
}

// Errors: kInvalidArgument for a missing --plan, --checkpoint or --out, a bad --strategy or
// --format, or a --timeout that is not positive.
absl::Status CheckShardFlags(const FlagParser& parser, ShardFlags* flags) {
  const bool reshard = flags->reshard;
  for (const char* name : {"plan", reshard ? "in" : "checkpoint", "out"}) {
    SHARDKIT_RETURN_IF_ERROR(Require(parser, {name}, kSeeHelp));
  }
  if (!reshard && parser.WasSet("src-rank")) flags->options.src_rank = flags->src_rank;
  flags->options.write.memory_bytes = flags->memory_mib << 20;
  flags->options.write.select.strict = flags->options.write.strict;
  SHARDKIT_ASSIGN_OR_RETURN(flags->options.write.format, ParseFormatFlag(flags->format));
  if (!reshard && parser.WasSet("strategy")) {
    SHARDKIT_ASSIGN_OR_RETURN(flags->options.strategy,
                              ForFlag("strategy", specs::ParseStrategy(flags->strategy)));
  }
  return CheckRankFlags(parser, &flags->ranks);
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

// --nproc N: `shardkit launch --nproc N -- shardkit <command> <the other arguments>` (--backend
// and --timeout reach every rank among them).
absl::StatusOr<int> LaunchRanks(const std::string& command, const std::vector<std::string>& args,
                                int64_t nproc) {
  SHARDKIT_RETURN_IF_ERROR(
      CheckNprocAllowed(absl::StrCat("each rank runs 'shardkit ", command, "' without it")));
  launch::LaunchOptions options;
  options.nproc = static_cast<int>(nproc);
  std::vector<std::string> rank_args = {command};
  for (std::string& arg : WithoutNproc(args)) rank_args.push_back(std::move(arg));
  return LaunchSelf(options, rank_args);
}

absl::Status RunRank(const ShardFlags& flags) {
  SHARDKIT_ASSIGN_OR_RETURN(ConnectOptions connect, ConnectOptionsFor(flags.ranks));
  // One deadline for the whole run: rendezvous, every collective step and the commit share it.
  const absl::Time deadline = absl::Now() + connect.timeout;
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Connect(connect));
  checkpoint::ShardCheckpointOptions options = flags.options;
  options.write.call.deadline = deadline;
  options.write.progress = ProgressWanted();
  checkpoint::ShardRunReport report;
  options.write.report = &report;
  SHARDKIT_RETURN_IF_ERROR(
      flags.reshard
          ? checkpoint::ReshardCheckpoint(
                {.in_dir = options.checkpoint_path, .write = options.write}, *comm, std::cerr)
          : checkpoint::ShardCheckpoint(options, *comm, std::cerr));
  // The source rank prints the summary, after the library's warnings.
  if (comm->rank() == report.src_rank)
    std::cerr << report::FormatShardSummary(report) << std::flush;
  return absl::OkStatus();
}

// Both commands: parse, then run N local ranks (--nproc) or be one rank.
int RunCommand(const char* command, FlagParser (*make_parser)(ShardFlags*),
               const std::vector<std::string>& args) {
  ShardFlags flags;
  FlagParser parser = make_parser(&flags);
  const ParseResult parsed = ParseCommand(parser, args, Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = CheckShardFlags(parser, &flags); !s.ok()) return ReportError(command, s);
  if (flags.ranks.nproc_set) {
    absl::StatusOr<int> exit_code =
        LaunchRanks(flags.reshard ? "reshard" : "shard", args, flags.ranks.nproc);
    if (!exit_code.ok()) return ReportError(command, exit_code.status());
    return *exit_code;
  }
  absl::Status status = RunRank(flags);
  if (!status.ok()) return ReportError(command, status);
  return 0;
}

}  // namespace

int RunShard(const std::vector<std::string>& args) {
  return RunCommand(kCommand, &ShardFlagParser, args);
}

int RunReshard(const std::vector<std::string>& args) {
  return RunCommand(kReshardCommand, &ReshardFlagParser, args);
}

}  // namespace shardkit::cli
