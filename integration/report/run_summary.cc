#include "integration/report/run_summary.h"

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "integration/checkpoint/progress.h"

namespace shardkit::report {
namespace {

using checkpoint::FormatBytes;
using checkpoint::FormatRate;

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// How the data moved: "scatter from rank 0", "direct: every rank read its own shards", or a
// reshard's "from DIR (4 ranks): every rank read its new shards itself".
std::string HowItMoved(const checkpoint::ShardRunReport& report) {
  if (report.reshard() && report.in_dcp_files >= 0) {
    return absl::StrCat("from ", report.in_dir, " (PyTorch DCP, ", report.in_dcp_files, " ",
                        report.in_files_kind, "): every rank read its new shards itself");
  }
  if (report.reshard()) {
    return absl::StrCat("from ", report.in_dir, " (", report.in_world_size,
                        " ranks): every rank read its new shards itself");
  }
  if (report.direct()) return "direct: every rank read its own shards";
  return absl::StrCat(std::string(checkpoint::WrittenByName(report.written_by)), " from rank ",
                      report.src_rank);
}

}  // namespace

std::string FormatShardSummary(const checkpoint::ShardRunReport& report) {
  const bool reshard = report.reshard();
  std::string out = absl::StrFormat(
      "%s: %d parameters (%d sharded, %d replicated) on %d ranks, %s\n"
      "  planned in %.3f s; %s %s in %d rounds in %.3f s (%s), memory budget %d MiB per rank, "
      "total %.3f s\n"
      "  %-4s  %-22s  %7s  ",
      reshard ? "shardkit reshard" : "shardkit shard", report.parameters, report.sharded,
      report.replicated, report.world_size, HowItMoved(report), report.plan_seconds,
      report.direct() ? "read" : "streamed", FormatBytes(report.moved_bytes), report.rounds,
      report.stream_seconds, FormatRate(report.moved_bytes, report.stream_seconds),
      report.memory_bytes >> 20, report.total_seconds, "rank", "file", "tensors");
  if (reshard) absl::StrAppendFormat(&out, "%12s  %9s  ", "bytes_read", "old_files");
  absl::StrAppendFormat(&out, "%12s  %13s  %15s\n", "bytes", "peak_rss_mib", "rss_growth_mib");
  for (size_t rank = 0; rank < report.ranks.size(); ++rank) {
    const checkpoint::ShardRunRank& row = report.ranks[rank];
    absl::StrAppendFormat(&out, "  %-4d  %-22s  %7d  ", rank, row.file, row.tensors);
    if (reshard) absl::StrAppendFormat(&out, "%12d  %9d  ", row.bytes_read, row.files_read);
    absl::StrAppendFormat(&out, "%12d  %13.1f  %15.1f\n", row.bytes_written, MiB(row.peak_rss),
                          MiB(row.rss_growth));
  }
  return out;
}

std::string FormatGatherSummary(const checkpoint::GatherReport& report) {
  std::string target = report.files.empty() ? report.out : report.files.front();
  if (!report.index_path.empty()) {
    target = absl::StrCat(report.out, " (", report.files.size(),
                          report.files.size() == 1 ? " file and " : " files and ",
                          std::filesystem::path(report.index_path).filename().string(), ")");
  }
  return absl::StrFormat(
      "shardkit gather: %d parameters (%s) from %d %s to %s in %.3f s (%s), "
      "peak RSS %.1f MiB\n",
      report.parameters, FormatBytes(report.bytes), report.rank_files, report.input_kind, target,
      report.seconds, FormatRate(report.bytes, report.seconds), MiB(report.peak_rss));
}

}  // namespace shardkit::report
