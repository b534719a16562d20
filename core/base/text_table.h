// FormatTable: the plain-text tables the CLI prints (`inspect`, `spec check --checkpoint`,
// `demo`'s summary), one formatter for all of them.
//
//   FormatTable({{"name", "shape"}, {"w", "[4, 8]"}})
//   // name  shape
//   // w     [4, 8]
#ifndef SHARDKIT_CORE_BASE_TEXT_TABLE_H_
#define SHARDKIT_CORE_BASE_TEXT_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

namespace shardkit {

using TableRow = std::vector<std::string>;

// Display width of UTF-8 text: its code points (bytes that do not continue a sequence), so "×"
// counts as one column.
size_t TextWidth(std::string_view text);

// Left-aligned columns separated by two spaces, each as wide as its widest cell (TextWidth);
// rows may have different numbers of cells; every line ends in "\n" with no trailing blanks.
std::string FormatTable(const std::vector<TableRow>& rows);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_TEXT_TABLE_H_
