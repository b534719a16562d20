#include "integration/formats/safetensors/sharding_info.h"

#include "testing/status_matchers.h"

namespace shardkit::safetensors {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ShardingInfo, RoundTrips) {
  const std::map<std::string, Shape> offsets = {{"w", {4, 0}}, {"b", {0}}, {"s", {}}};
  const std::string json = ShardingInfoJson(offsets);
  EXPECT_EQ(json, R"({"b":{"saved_offsets":[0]},"s":{"saved_offsets":[]},)"
                  R"("w":{"saved_offsets":[4,0]}})");
  absl::StatusOr<std::map<std::string, Shape>> parsed = ParseShardingInfo(json, "f");
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(*parsed, offsets);
}

TEST(ShardingInfo, RefusesWhatIsNotOffsets) {
  for (const char* bad : {"[", "[1]", R"({"w": 3})", R"({"w": {"offsets": [0]}})",
                          R"({"w": {"saved_offsets": [-1]}})", R"({"w": {"saved_offsets": ["0"]}})",
                          R"({"w": {"saved_offsets": [1.5]}})"}) {
    EXPECT_THAT(ParseShardingInfo(bad, "m.safetensors").status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("m.safetensors: __metadata__ DCP_SHARDING_INFO: ")))
        << bad;
  }
}

}  // namespace
}  // namespace shardkit::safetensors
