#include "integration/report/inspect_table.h"

#include "gtest/gtest.h"

namespace shardkit::report {
namespace {

using checkpoint::InspectedKind;
using checkpoint::Inspection;

TEST(FormatInspectionTest, CheckpointWithoutMetadataIsOneTable) {
  const Inspection inspection{.kind = InspectedKind::kCheckpoint,
                              .columns = {"name", "dtype", "shape", "bytes"},
                              .rows = {{"b", "F32", "[4]", "16"}, {"w", "BF16", "[6, 4]", "48"}}};
  EXPECT_EQ(FormatInspection(inspection),
            "name  dtype  shape   bytes\n"
            "b     F32    [4]     16\n"
            "w     BF16   [6, 4]  48\n");
}

// Facts, metadata and files form the second table, in that order, aligned together; widths count
// characters, not bytes ("×").
TEST(FormatInspectionTest, FactsMetadataAndFilesFollowABlankLine) {
  const Inspection inspection{
      .kind = InspectedKind::kShardDirectory,
      .columns = {"name", "spec", "rank 0", "rank 1"},
      .rows = {{"w", "chunk(dim=0)", "[3, 4]", "[3, 4]"}, {"b", "enumerable(3)", "[1]+[2]", "-"}},
      .facts = {{"world_size", "2"}, {"strategy", "scatter"}},
      .metadata = {{"note", "a × b"}, {"format", "pt"}},
      .files = {"m-00001.safetensors"}};
  EXPECT_EQ(FormatInspection(inspection),
            "name  spec           rank 0   rank 1\n"
            "w     chunk(dim=0)   [3, 4]   [3, 4]\n"
            "b     enumerable(3)  [1]+[2]  -\n"
            "\n"
            "world_size  2\n"
            "strategy    scatter\n"
            "metadata    format               pt\n"
            "metadata    note                 a × b\n"
            "file        m-00001.safetensors\n");
}

TEST(FormatInspectionTest, NoRowsIsTheHeaderAlone) {
  EXPECT_EQ(FormatInspection({.columns = {"name", "dtype"}}), "name  dtype\n");
}

}  // namespace
}  // namespace shardkit::report
