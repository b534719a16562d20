#include "integration/formats/shard_dir/rank_files.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace shardkit::shard_dir {
namespace {

using Metadata = std::map<std::string, std::string>;

// NAME#K tensors (several shards of one parameter in this file) are left out: torch's reader
// then refuses the directory instead of loading the rest of that parameter.
TEST(RankFileMetadata, AddsEveryTensorsOffsetsAsTorchReadsThem) {
  const Metadata got = RankFileMetadata(
      {{"format", "pt"}}, {{"w", {4, 0}}, {"norm", {0}}, {"w2#3", {0, 6}}, {"s", {}}});
  EXPECT_EQ(got, (Metadata{{"format", "pt"},
                           {"DCP_SHARDING_INFO",
                            R"({"norm":{"saved_offsets":[0]},"s":{"saved_offsets":[]},)"
                            R"("w":{"saved_offsets":[4,0]}})"}}));
  EXPECT_EQ(RankFileMetadata({}, {{"w2#3", {0, 6}}}), (Metadata{{"DCP_SHARDING_INFO", "{}"}}));
}

TEST(RankFileMetadata, ReplacesTheCheckpointsOwnKey) {
  // A checkpoint that torch's HuggingFaceStorageWriter wrote carries its file's offsets.
  const Metadata got = RankFileMetadata(
      {{"DCP_SHARDING_INFO", R"({"w":{"saved_offsets":[8,0]}})"}, {"DCP_VERSION", "1.0"}},
      {{"w", {2, 0}}});
  EXPECT_EQ(got, (Metadata{{"DCP_SHARDING_INFO", R"({"w":{"saved_offsets":[2,0]}})"},
                           {"DCP_VERSION", "1.0"}}));
}

TEST(RankFileMetadata, EmptyFileGetsNoKey) {
  EXPECT_EQ(RankFileMetadata({}, {}), Metadata{});
  EXPECT_EQ(RankFileMetadata({{"DCP_SHARDING_INFO", "{}"}, {"note", "x"}}, {}),
            (Metadata{{"note", "x"}}));
}

}  // namespace
}  // namespace shardkit::shard_dir
