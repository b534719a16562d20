#include "integration/formats/shard_dir/shard_dir.h"

#include <string>

#include "specs/spec_json.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::shard_dir {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

specs::ParameterLayout Layout(std::string_view spec_json, const Shape& shape, int world) {
  std::optional<specs::ShardingSpec> spec;
  if (spec_json != specs::kReplicatedJson) spec = *specs::ParseSpec(spec_json);
  return *specs::LayOutParameter(spec, shape, world);
}

ShardIndex ExampleIndex() {
  ShardIndex index{3, 0, WrittenBy::kShardScatter, {{"format", "pt"}}, {}};
  index.parameters.push_back(MakeIndexParameter(
      "embed.weight", DType::kFloat32, {10, 8},
      Layout(R"({"type":"chunk","dim":1,"placements":["rank:2/cpu","rank:0/cpu","rank:1/cpu"]})",
             {10, 8}, 3)));
  index.parameters.push_back(MakeIndexParameter("norm.weight", DType::kBFloat16, {4},
                                                Layout(specs::kReplicatedJson, {4}, 3)));
  index.parameters.push_back(MakeIndexParameter(
      "twice", DType::kInt8, {2, 2},
      Layout(R"({"type":"chunk","dim":0,"placements":["rank:1","rank:1","rank:0"]})", {2, 2}, 3)));
  return index;
}

TEST(ShardDirTest, FileAndTensorNames) {
  EXPECT_EQ(RankFileName(3), "rank-00003.safetensors");
  EXPECT_EQ(RankFileName(123456), "rank-123456.safetensors");
  const specs::ParameterLayout layout =
      Layout(R"({"type":"chunk","dim":0,"placements":["rank:1","rank:0","rank:1"]})", {2}, 2);
  // Shard 2 has size 0 but still counts: rank 1 holds two shards.
  EXPECT_THAT(ShardTensorNames("w", layout.shards), ElementsAre("w#0", "w", "w#2"));
  EXPECT_THAT(CheckNoShardSuffix("a#b"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"a#b\"")));
}

TEST(ShardDirTest, IndexRoundTripsAndKeepsTheDocumentedFields) {
  const ShardIndex index = ExampleIndex();
  const std::string text = IndexToJson(index);
  EXPECT_THAT(text, HasSubstr(R"({"format":"shardkit-shards","version":1,"world_size":3,)"
                              R"("src_rank":0,"strategy":"scatter","metadata":{"format":"pt"},)"));
  EXPECT_THAT(text, HasSubstr(R"("spec":{"dim":1,"placements":["rank:2/cpu","rank:0/cpu",)"
                              R"("rank:1/cpu"],"type":"chunk","version":1})"));
  EXPECT_THAT(text, HasSubstr(R"({"offsets":[0,3],"sizes":[10,3],"rank":0,)"
                              R"("file":"rank-00000.safetensors","tensor":"embed.weight"})"));
  EXPECT_THAT(text, HasSubstr(R"("spec":"replicated")"));
  EXPECT_THAT(text, HasSubstr(R"("tensor":"twice#1")"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardIndex parsed, ParseIndex(text, "index.json"));
  EXPECT_EQ(IndexToJson(parsed), text);
}

// index.json's "strategy": which program wrote the directory; a plan's strategies, "reshard" and
// "save", the strings unchanged.
TEST(ShardDirTest, WrittenByRoundTripsItsStrings) {
  for (WrittenBy w : {WrittenBy::kShardScatter, WrittenBy::kShardBroadcast, WrittenBy::kShardDirect,
                      WrittenBy::kReshard, WrittenBy::kSave}) {
    EXPECT_THAT(ParseWrittenBy(WrittenByName(w)), testing::IsOkAndHolds(w));
  }
  EXPECT_EQ(WrittenByName(WrittenByShard(specs::Strategy::kDirect)), "direct");
  EXPECT_EQ(WrittenByName(WrittenBy::kSave), "save");
  EXPECT_THAT(ParseWrittenBy("gather"),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("\"reshard\" or \"save\", got \"gather\"")));
}

TEST(ShardDirTest, RankFileNamesRoundTrip) {
  EXPECT_EQ(RankOfFileName(RankFileName(3)), 3);
  EXPECT_EQ(RankOfFileName("rank-123456.safetensors"), 123456);
  EXPECT_EQ(RankOfFileName("rank-0003.safetensors"), -1);  // fewer than 5 digits
  EXPECT_EQ(RankOfFileName("rank-0000x.safetensors"), -1);
  EXPECT_EQ(RankOfFileName("rank-00003.safetensors.tmp.12"), -1);
}

TEST(ShardDirTest, InconsistentIndexesNameThePath) {
  const std::string text = IndexToJson(ExampleIndex());
  auto replaced = [&](std::string_view from, std::string_view to) {
    std::string out = text;
    out.replace(out.find(from), from.size(), to);
    return ParseIndex(out, "dir/index.json");
  };
  EXPECT_THAT(replaced(R"("sizes":[10,3],"rank":0)", R"("sizes":[10,4],"rank":0)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(R"(dir/index.json: parameters["embed.weight"].shards[1]: )"
                                 R"(does not match the spec's shard)")));
  EXPECT_THAT(replaced(R"("tensor":"twice#1")", R"("tensor":"twice")"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(R"(parameters["twice"].shards[1]: expected file)")));
  EXPECT_THAT(replaced(R"("world_size":3)", R"("world_size":"3")"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world_size: expected")));
  EXPECT_THAT(replaced(R"("world_size":3)", R"("world_size":1048577)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("world_size: world size 1048577 is outside [1, 1048576]")));
  EXPECT_THAT(replaced(R"("fingerprint":"sha256:)", R"("fingerprint":"sha256:0)"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fingerprint: does not")));
  EXPECT_THAT(replaced(R"("version":1,"world)", R"("version":1,"extra":0,"world)"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extra")));
  EXPECT_THAT(ParseIndex("{", "i.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("i.json: invalid JSON")));
}

}  // namespace
}  // namespace shardkit::shard_dir
