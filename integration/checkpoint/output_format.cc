#include "integration/checkpoint/output_format.h"

#include "absl/strings/str_cat.h"
#include "integration/formats/dcp/dcp_output.h"
#include "integration/formats/shard_dir/shard_dir_output.h"

namespace shardkit::checkpoint {
namespace {

const shard_dir::ShardDirOutput kShardDir;
const dcp::DcpOutput kDcp;

}  // namespace

const formats::OutputWriter& OutputWriterOf(OutputFormat format) {
  if (format == OutputFormat::kDcp) return kDcp;
  return kShardDir;
}

const formats::OutputKind& OutputKindOf(OutputFormat format) { return OutputWriterOf(format); }

const formats::OutputKinds& KnownOutputKinds() {
  // DCP first: files torch wrote are named as such before anything else is said of them.
  static const formats::OutputKinds* const kinds = new formats::OutputKinds{&kDcp, &kShardDir};
  return *kinds;
}

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "shardkit") return OutputFormat::kShardkit;
  if (name == "dcp") return OutputFormat::kDcp;
  return absl::InvalidArgumentError(
      absl::StrCat("expected shardkit or dcp, got \"", std::string(name), "\""));
}

absl::StatusOr<OutputDirectory> PrepareOutput(const std::string& dir, OutputFormat format,
                                              bool owner) {
  return OutputDirectory::Prepare(dir, OutputKindOf(format), KnownOutputKinds(), owner);
}

absl::StatusOr<formats::OutputContents> ExamineOutput(const std::string& dir) {
  return formats::ExamineOutputDir(dir, KnownOutputKinds());
}

}  // namespace shardkit::checkpoint
