#include "core/base/text_table.h"

#include "gtest/gtest.h"

namespace shardkit {
namespace {

TEST(TextTableTest, ColumnsAreAsWideAsTheirWidestCellWithTwoSpacesBetween) {
  EXPECT_EQ(FormatTable({{"name", "shape", "bytes"}, {"embed.weight", "[4, 8]", "128"}}),
            "name          shape   bytes\n"
            "embed.weight  [4, 8]  128\n");
}

TEST(TextTableTest, NoTrailingBlanksWhenTheLastCellsAreEmptyOrRowsAreShort) {
  EXPECT_EQ(FormatTable({{"a", "bb", ""}, {"ccc"}, {"d", "e", "f"}}),
            "a    bb\n"
            "ccc\n"
            "d    e   f\n");
}

TEST(TextTableTest, WidthCountsCodePointsNotBytes) {
  EXPECT_EQ(TextWidth("4×8"), 3u);
  EXPECT_EQ(FormatTable({{"4×8", "x"}, {"abcd", "y"}}),
            "4×8   x\n"
            "abcd  y\n");
}

TEST(TextTableTest, NoRowsIsEmpty) { EXPECT_EQ(FormatTable({}), ""); }

}  // namespace
}  // namespace shardkit
