#include "integration/cli/demo_summary.h"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/text_table.h"

namespace shardkit::cli {
namespace {

using demo::DemoReport;
using demo::RankReport;
using demo::SyntheticModelBytes;
using demo::SyntheticParameters;
using Row = TableRow;

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// "rows (chunk dim 0)", "columns (chunk dim 1)", "enumerable (4 shards)", "replicated".
std::string SpecSummary(const specs::ParameterLayout& layout) {
  if (!layout.spec.has_value()) return "replicated";
  if (const auto* chunk = std::get_if<specs::ChunkShardingSpec>(&*layout.spec)) {
    return absl::StrFormat("%s (chunk dim %d)", chunk->dim == 0 ? "rows" : "columns", chunk->dim);
  }
  return absl::StrFormat("enumerable (%d shards)", layout.shards.size());
}

// The cells after the name: shape, spec, then each rank's shard shapes ("-" for none, "a + b" for
// several).
Row ParameterCells(const specs::ResolvedParameter& parameter, const Shape& shape, int world_size) {
  Row cells = {ShapeToString(shape), SpecSummary(parameter.layout)};
  std::vector<std::vector<std::string>> per_rank(world_size);
  for (const specs::ShardMetadata& shard : parameter.layout.shards) {
    per_rank[shard.placement.rank()].push_back(ShapeToString(shard.sizes));
  }
  for (const std::vector<std::string>& shapes : per_rank) {
    cells.push_back(shapes.empty() ? "-" : absl::StrJoin(shapes, " + "));
  }
  return cells;
}

// "layers.3.attn.qkv.weight" -> "layers.*.attn.qkv.weight"; other names unchanged.
std::string GroupName(const std::string& name) {
  constexpr char kLayers[] = "layers.";
  const size_t end = name.find('.', sizeof(kLayers) - 1);
  if (!absl::StartsWith(name, kLayers) || end == std::string::npos) return name;
  return absl::StrCat(kLayers, "*", name.substr(end));
}

// One row per parameter, except that the layers' copies of a parameter share one row
// ("layers.*.mlp.up.weight ×6") when all their cells agree.
std::string ParameterTable(const DemoReport& report) {
  Row header = {"parameter", "shape", "spec"};
  for (int r = 0; r < report.world_size; ++r) header.push_back(absl::StrCat("rank ", r));
  const std::vector<specs::ParameterInfo> params = SyntheticParameters(report.model);
  struct Group {
    Row cells;
    int count = 0;
    bool uniform = true;
  };
  absl::flat_hash_map<std::string, Group> groups;
  std::vector<Row> cells(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    cells[i] = ParameterCells(report.parameters[i], params[i].shape, report.world_size);
    Group& group = groups[GroupName(params[i].name)];
    if (group.count++ == 0) group.cells = cells[i];
    group.uniform = group.uniform && group.cells == cells[i];
  }
  std::vector<Row> rows = {header};
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string group_name = GroupName(params[i].name);
    Group& group = groups[group_name];
    if (group.count < 2 || !group.uniform) {
      rows.push_back(Row{params[i].name});
    } else if (group.cells.empty()) {
      continue;  // the group's row is out already
    } else {
      rows.push_back(Row{absl::StrFormat("%s ×%d", group_name, group.count)});
      group.cells.clear();
    }
    rows.back().insert(rows.back().end(), cells[i].begin(), cells[i].end());
  }
  return FormatTable(rows);
}

std::string RankTable(const DemoReport& report) {
  std::vector<Row> rows = {{"rank", "shards", "holds MiB", "shard: recv MiB", "shard: sent MiB",
                            "gather: sent MiB", "peak RSS MiB"}};
  RankReport total;
  for (size_t r = 0; r < report.ranks.size(); ++r) {
    const RankReport& rank = report.ranks[r];
    rows.push_back({absl::StrCat(r), absl::StrCat(rank.shards),
                    absl::StrFormat("%.2f", MiB(rank.local_bytes)),
                    absl::StrFormat("%.2f", MiB(rank.shard_bytes_received)),
                    absl::StrFormat("%.2f", MiB(rank.shard_bytes_sent)),
                    absl::StrFormat("%.2f", MiB(rank.gather_bytes_sent)),
                    absl::StrFormat("%.1f", MiB(rank.peak_rss_bytes))});
    total.shards += rank.shards;
    total.local_bytes += rank.local_bytes;
    total.shard_bytes_received += rank.shard_bytes_received;
    total.shard_bytes_sent += rank.shard_bytes_sent;
    total.gather_bytes_sent += rank.gather_bytes_sent;
  }
  rows.push_back({"all", absl::StrCat(total.shards),
                  absl::StrFormat("%.2f", MiB(total.local_bytes)),
                  absl::StrFormat("%.2f", MiB(total.shard_bytes_received)),
                  absl::StrFormat("%.2f", MiB(total.shard_bytes_sent)),
                  absl::StrFormat("%.2f", MiB(total.gather_bytes_sent)), ""});
  return FormatTable(rows);
}

std::string Verdict(const DemoReport& report) {
  const size_t n = report.parameters.size();
  if (report.verified()) {
    return absl::StrFormat(
        "verified: all %d parameters bit-exact (sharded ones gathered to rank 0 on %s, replicated "
        "ones checked on every rank)\n",
        n, report.device.ToString());
  }
  std::vector<std::string> counts;
  for (size_t r = 0; r < report.ranks.size(); ++r) {
    if (report.ranks[r].mismatches > 0) {
      counts.push_back(absl::StrFormat("rank %d: %d", r, report.ranks[r].mismatches));
    }
  }
  return absl::StrFormat(
      "verification FAILED: parameters differing (%s); on rank 0: %s\n",
      absl::StrJoin(counts, ", "),
      report.mismatched.empty() ? "none" : absl::StrJoin(report.mismatched, ", "));
}

}  // namespace

std::string FormatDemoSummary(const DemoReport& report) {
  const ShardStats& s = report.shard_stats;
  return absl::StrCat(
      kDemoSummaryStart,
      absl::StrFormat("%d parameters, %.1f MiB float32, %d rank%s, backend %s%s, "
                      "strategy %s, source rank %d\n\n",
                      report.parameters.size(), MiB(SyntheticModelBytes(report.model)),
                      report.world_size, report.world_size == 1 ? "" : "s", report.backend,
                      report.device.is_cuda() ? " (tensors on cuda:LOCAL_RANK)" : "",
                      specs::StrategyName(report.plan.strategy), report.plan.src_rank),
      ParameterTable(report), "\n", RankTable(report), "\n",
      absl::StrFormat("time on rank 0: build %.2f s, shard %.2f s (check %.2f, agree %.2f, "
                      "transfer %.2f, commit %.2f), gather+verify %.2f s\n",
                      report.build_seconds, report.shard_seconds, s.check_seconds, s.agree_seconds,
                      s.transfer_seconds, s.commit_seconds, report.gather_seconds),
      Verdict(report));
}

}  // namespace shardkit::cli
