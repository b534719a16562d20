#include "integration/report/spec_text.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "integration/report/inspect_table.h"

namespace shardkit::report {
namespace {

std::string ShardTable(const std::vector<specs::ShardMetadata>& shards) {
  size_t offsets_width = 7;  // "offsets"
  for (const specs::ShardMetadata& s : shards) {
    offsets_width = std::max(offsets_width, ShapeToString(s.offsets).size());
  }
  std::string out = absl::StrFormat("%-5s  %-4s  %-*s  %s\n", "index", "rank",
                                    static_cast<int>(offsets_width), "offsets", "sizes");
  for (size_t i = 0; i < shards.size(); ++i) {
    absl::StrAppendFormat(&out, "%-5d  %-4d  %-*s  %s\n", i, shards[i].placement.rank(),
                          static_cast<int>(offsets_width), ShapeToString(shards[i].offsets),
                          ShapeToString(shards[i].sizes));
  }
  return out;
}

}  // namespace

std::string FormatSpecCheck(const checkpoint::SpecCheck& check) {
  if (check.dry_run.has_value()) return FormatInspection(*check.dry_run);
  std::string out = absl::StrCat(check.canonical, "\n", check.fingerprint, "\n");
  if (check.shards.has_value()) out += ShardTable(*check.shards);
  return out;
}

}  // namespace shardkit::report
