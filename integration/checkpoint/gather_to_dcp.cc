// GatherToDcp (gather_checkpoint.h): a reshard into a DCP checkpoint over a world of one; and
// GatherTo, the choice between it and the other outputs.
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/internal/write_shard_directory.h"
#include "integration/checkpoint/output_format.h"

namespace shardkit::checkpoint {

absl::Status GatherToDcp(const std::string& in_dir, const std::string& out_dir, std::ostream& log,
                         const GatherOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> self, Connect(ConnectOptions{}));
  specs::Plan plan;  // no rules: every tensor whole, on the one rank
  plan.src_rank = 0;
  plan.strategy = specs::Strategy::kDirect;
  ShardRunReport report;
  ShardWriteOptions write{.plan_path = "(gather: no plan)",
                          .plan = std::move(plan),
                          .out_dir = out_dir,
                          .progress = options.progress,
                          .memory_bytes = options.memory_bytes,
                          .allow_replicated_only = true,  // one rank holds every tensor whole
                          .format = OutputFormat::kDcp,
                          .select = options.select,
                          .report = &report};
  SHARDKIT_RETURN_IF_ERROR(internal::WriteShardDirectory(
      {.checkpoint_path = in_dir, .write = write}, /*reshard=*/true, *self, log));
  if (options.report == nullptr) return absl::OkStatus();
  const formats::OutputWriter& writer = OutputWriterOf(OutputFormat::kDcp);
  const std::filesystem::path dir(out_dir);
  *options.report = {
      .parameters = report.parameters,
      .bytes = report.moved_bytes,
      .rank_files = report.in_dcp_files >= 0 ? report.in_dcp_files : report.in_world_size,
      .input_kind = report.in_dcp_files >= 0 ? report.in_files_kind : "rank files",
      .out = out_dir,
      .files = {(dir / writer.RankFileName(0)).string()},
      .index_path = (dir / writer.last_file_name()).string(),
      .seconds = report.total_seconds,
      .peak_rss = report.ranks.empty() ? 0 : report.ranks[0].peak_rss};
  return absl::OkStatus();
}

absl::Status GatherTo(const std::string& in_dir, const std::string& out, const GatherOutput& output,
                      std::ostream& log, const GatherOptions& options) {
  if (output.max_file_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GatherOutput::max_file_bytes is negative (", output.max_file_bytes, ")"));
  }
  if (output.format == OutputFormat::kDcp) {
    if (output.max_file_bytes > 0) {
      return absl::InvalidArgumentError(
          "--max-shard-size does not apply to --format dcp (a DCP checkpoint of one rank is one "
          "__0_0.distcp file)");
    }
    return GatherToDcp(in_dir, out, log, options);
  }
  if (output.max_file_bytes > 0) {
    return GatherHuggingFace(in_dir, out, output.max_file_bytes, log, options);
  }
  return GatherCheckpoint(in_dir, out, log, options);
}

}  // namespace shardkit::checkpoint
