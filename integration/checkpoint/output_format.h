// The output formats a run can write (`--format`), each as one formats::OutputWriter (its
// directory rules and its files) — the one place that knows every format, so that the writers
// (`shard`, `reshard`, SaveShards), OutputDirectory (formats/output_file/output_directory.h) and
// the formats themselves need not know each other.
//
//   const formats::OutputWriter& writer = OutputWriterOf(OutputFormat::kDcp);
//   SHARDKIT_ASSIGN_OR_RETURN(OutputDirectory out,
//                             PrepareOutput(dir, OutputFormat::kDcp, /*owner=*/rank == 0));
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_OUTPUT_FORMAT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_OUTPUT_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "integration/formats/output_file/output_directory.h"
#include "integration/formats/output_file/output_kind.h"
#include "integration/formats/output_file/output_writer.h"

namespace shardkit::checkpoint {

using formats::OutputDirectory;

// What an output directory holds: a shardkit shard directory (index.json and rank files:
// formats/shard_dir), or a PyTorch DCP checkpoint (`.metadata` and `__R_0.distcp` files:
// formats/dcp) — `shard`, `reshard` and SaveShards with `--format dcp`.
enum class OutputFormat { kShardkit, kDcp };

// "shardkit" or "dcp" (the CLI's --format, Python's format=).
// Errors: kInvalidArgument `expected shardkit or dcp, got "X"`.
[[nodiscard]] absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

// `format`'s writer; its rules (an OutputWriter is an OutputKind).
const formats::OutputWriter& OutputWriterOf(OutputFormat format);
const formats::OutputKind& OutputKindOf(OutputFormat format);

// Every format whose earlier output a run may find, and replace, in its directory.
const formats::OutputKinds& KnownOutputKinds();

// OutputDirectory::Prepare writing `format` into `dir`, any known format's earlier output
// replaceable. Errors: as OutputDirectory::Prepare.
[[nodiscard]] absl::StatusOr<OutputDirectory> PrepareOutput(const std::string& dir,
                                                            OutputFormat format, bool owner);

// ExamineOutputDir with every known format. Errors: as ExamineOutputDir.
[[nodiscard]] absl::StatusOr<formats::OutputContents> ExamineOutput(const std::string& dir);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_OUTPUT_FORMAT_H_
