// `shardkit gather --in DIR --out OUT.safetensors`: reassembles a checkpoint from a shard
// directory (checkpoint::GatherCheckpoint). A summary line goes to stderr.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit gather";

}  // namespace

int RunGather(const std::vector<std::string>& args) {
  FlagParser flags(kCommand, "--in DIR --out OUT.safetensors");
  std::string in_dir, out_path;
  flags.AddString("in", &in_dir, "shard directory written by 'shardkit shard'");
  flags.AddString("out", &out_path, "the safetensors file to write");
  std::vector<std::string> positional;
  absl::Status parsed = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  if (parsed.ok() && !positional.empty()) {
    parsed =
        absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", positional[0], "\""));
  }
  if (parsed.ok() && (!flags.WasSet("in") || !flags.WasSet("out"))) {
    parsed = absl::InvalidArgumentError("--in and --out are required (see --help)");
  }
  if (!parsed.ok()) return ReportError(kCommand, parsed);
  absl::Status status =
      checkpoint::GatherCheckpoint(in_dir, out_path, std::cerr, ::isatty(STDERR_FILENO));
  if (!status.ok()) return ReportError(kCommand, status);
  return 0;
}

}  // namespace shardkit::cli
