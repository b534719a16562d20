#include "integration/report/inspect_table.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/text_table.h"

namespace shardkit::report {

std::string FormatInspection(const checkpoint::Inspection& inspection) {
  std::vector<TableRow> table = {inspection.columns};
  table.insert(table.end(), inspection.rows.begin(), inspection.rows.end());
  std::vector<TableRow> trailer;
  for (const auto& [label, value] : inspection.facts) trailer.push_back({label, value});
  for (const auto& [key, value] : inspection.metadata) trailer.push_back({"metadata", key, value});
  for (const std::string& file : inspection.files) trailer.push_back({"file", file});
  std::string out = FormatTable(table);
  if (!trailer.empty()) absl::StrAppend(&out, "\n", FormatTable(trailer));
  return out;
}

}  // namespace shardkit::report
