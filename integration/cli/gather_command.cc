// `shardkit gather --in DIR --out OUT.safetensors [--memory-mib M]`: reassembles a checkpoint
// from a shard directory (checkpoint::GatherCheckpoint). A summary line goes to stderr.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit gather";

}  // namespace

int RunGather(const std::vector<std::string>& args) {
  FlagParser flags(kCommand, "--in DIR --out OUT.safetensors [--memory-mib M]");
  std::string in_dir, out_path;
  int64_t memory_mib = kDefaultMemoryMib;
  flags.AddString("in", &in_dir, "shard directory written by 'shardkit shard'");
  flags.AddString("out", &out_path, "the safetensors file to write");
  AddMemoryFlag(flags, &memory_mib);
  const ParseResult parsed = ParseCommand(flags, args, Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = Require(flags, {"in", "out"}, kSeeHelp); !s.ok()) {
    return ReportError(kCommand, s);
  }
  const checkpoint::GatherOptions options{.progress = ProgressWanted(),
                                          .memory_bytes = memory_mib << 20};
  absl::Status status = checkpoint::GatherCheckpoint(in_dir, out_path, std::cerr, options);
  if (!status.ok()) return ReportError(kCommand, status);
  return 0;
}

}  // namespace shardkit::cli
