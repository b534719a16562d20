#include "integration/cli/commands.h"

#include <iostream>
#include <string_view>

#include "absl/strings/str_format.h"

namespace shardkit::cli {
namespace {

// One entry per subcommand, in the order --help lists them.
constexpr Command kCommands[] = {
    {"launch", "run N local ranks of a command with the SHARDKIT_* environment", &RunLaunch},
    {"shard", "shard a safetensors checkpoint across ranks with a JSON plan", &RunShard},
    {"reshard", "lay a shard directory out anew for another plan or world size", &RunReshard},
    {"gather", "reassemble a checkpoint from a shard directory", &RunGather},
    {"inspect", "print a table of a safetensors file or shard directory", &RunInspect},
    {"spec", "validate a sharding spec or plan: 'spec check FILE.json'", &RunSpec},
    {"demo", "the main job: shard a synthetic model across local ranks and verify it", &RunDemo},
    {"bench", "benchmark ShardParameter against the raw backend", &RunBench},
};

std::string Usage() {
  std::string out =
      "usage: shardkit COMMAND [ARGS...]\n\n"
      "shardkit shards model parameters across the ranks of a distributed job.\n\n"
      "commands:\n";
  for (const Command& command : kCommands) {
    absl::StrAppendFormat(&out, "  %-9s %s\n", command.name, command.summary);
  }
  out +=
      "\nRun 'shardkit COMMAND --help' for a command's flags, 'shardkit --version' for the\n"
      "version, the build id and the backends this program finds (built in and plugins).\n"
      "Exit status: 0 success, 2 invalid request (arguments or inputs), 1 anything else.\n";
  return out;
}

}  // namespace

const char kPlanHelp[] =
    R"(plan (PLAN.json), for example:
  {"src_rank": 0, "strategy": "scatter", "rules": [
    {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
    {"match": "layers.*.attn.o_proj.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
    {"match": "layers.*.attn.*_proj.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
    {"match": "**.mlp.*.weight", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1"]}},
    {"match": "lm_head.weight", "spec": {"type": "chunk", "dim": 0, "align": 64, "placements": {"ranks": "0..1"}}}]}
Patterns match a parameter's whole name:
  *   matches any characters within one dotted segment (never '.'): layers.*.attn.o_proj.weight
  **  matches zero or more whole segments: **.bias matches bias and a.b.bias
  the first rule that matches wins: o_proj above gets dim 1, not *_proj's dim 0
  a parameter no rule matches is replicated: whole on every rank
"src_rank" (default 0) and "strategy" (scatter, broadcast or direct; default scatter) are
optional. Placements: "rank:R" or "rank:R/cpu", or {"ranks": "all" | [0, 2] | "0..3"}.
Check a plan with 'shardkit spec check PLAN.json'.
)";

int RunShardkit(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << "shardkit: missing command\n" << Usage();
    return 2;
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << Usage();
    return 0;
  }
  if (name == "--version") {
    return RunVersion(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  for (const Command& command : kCommands) {
    if (name == command.name) {
      return command.run(std::vector<std::string>(args.begin() + 1, args.end()));
    }
  }
  std::cerr << "shardkit: unknown command \"" << name << "\"\n" << Usage();
  return 2;
}

}  // namespace shardkit::cli
