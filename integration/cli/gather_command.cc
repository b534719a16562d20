// `shardkit gather --in DIR --out OUT.safetensors [--max-shard-size SIZE] [--memory-mib M]`:
// reassembles a checkpoint from a shard directory or a PyTorch DCP checkpoint
// (checkpoint::GatherCheckpoint), or with --max-shard-size writes it into directory OUT as a
// Hugging Face multi-file checkpoint (checkpoint::GatherHuggingFace), or with --format dcp as a
// DCP checkpoint of one rank (checkpoint::GatherToDcp); checkpoint::GatherTo chooses. The summary
// line (report/run_summary.h) goes to stderr.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/reshard_checkpoint.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/report/run_summary.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit gather";

}  // namespace

int RunGather(const std::vector<std::string>& args) {
  FlagParser flags(kCommand,
                   "--in DIR --out OUT.safetensors [SELECTION] [--memory-mib M]\n"
                   "       shardkit gather --in DIR --out OUT_DIR --max-shard-size SIZE "
                   "[SELECTION] [--memory-mib M]\n"
                   "       shardkit gather --in DIR --out OUT_DIR --format dcp [SELECTION] "
                   "[--memory-mib M]\n"
                   "       SELECTION: [--include GLOB]... [--exclude GLOB]... "
                   "[--strip-prefix PREFIX] [--strict]");
  std::string in_dir, out_path, format;
  int64_t memory_mib = kDefaultMemoryMib, max_shard_bytes = 0;
  checkpoint::TensorSelection select;
  flags.AddString("in", &in_dir,
                  "shard directory written by 'shardkit shard' or 'reshard', or a PyTorch DCP "
                  "checkpoint directory (.metadata, *.distcp) (required)");
  flags.AddString("out", &out_path,
                  "the safetensors file to write (with --max-shard-size: a directory holding no "
                  "weights yet: new, empty, or a model folder's config.json, "
                  "generation_config.json and tokenizer files, left alone) (required)");
  flags.AddByteSize("max-shard-size", &max_shard_bytes,
                    "write a Hugging Face checkpoint of files of at most SIZE tensor bytes "
                    "(500MB, 2GiB, 1000000; KB/MB/GB are powers of 1000) (default: one "
                    "safetensors file)");
  AddFormatFlag(flags, &format,
                "shardkit (a safetensors file, or Hugging Face files with --max-shard-size) or "
                "dcp (directory OUT_DIR as a PyTorch DCP checkpoint of one rank: __0_0.distcp and "
                ".metadata) (default: shardkit)");
  AddSelectionFlags(flags, &select, /*strip_prefix=*/true);
  AddMemoryFlag(flags, &memory_mib);
  const ParseResult parsed = ParseCommand(flags, args, Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = Require(flags, {"in", "out"}, kSeeHelp); !s.ok()) {
    return ReportError(kCommand, s);
  }
  const absl::StatusOr<checkpoint::OutputFormat> out_format = ParseFormatFlag(format);
  if (!out_format.ok()) return ReportError(kCommand, out_format.status());
  checkpoint::GatherReport report;
  const checkpoint::GatherOptions options{.select = std::move(select),
                                          .progress = ProgressWanted(),
                                          .memory_bytes = memory_mib << 20,
                                          .report = &report};
  const absl::Status status = checkpoint::GatherTo(
      in_dir, out_path, {.format = *out_format, .max_file_bytes = max_shard_bytes}, std::cerr,
      options);
  if (!status.ok()) return ReportError(kCommand, status);
  std::cerr << report::FormatGatherSummary(report) << std::flush;
  return 0;
}

}  // namespace shardkit::cli
