// The engine test suite (engine_test_suite.h): the fixture and its parameters. The cases are in
// engine_test_suite_round_trip.cc (shard, gather and reshard move bytes exactly),
// engine_test_suite_plans.cc (plans, sub-groups, replication, InitFromLocalShards) and
// engine_test_suite_errors.cc (cross-rank errors). Each case is a JSON argument so that the forked
// ranks of a shared group (one per world size) can run it; RunCase adds the suite's "device" to it.
#include "core/engine/engine_test_suite.h"

#include <string>
#include <vector>

#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {

void EngineTest::SetUp() {
  const EngineParam& p = GetParam();
  if (p.device_count != nullptr && p.device_count() < p.world_size) {
    GTEST_SKIP() << p.world_size << " ranks need " << p.world_size
                 << " CUDA devices; this machine has " << p.device_count();
  }
}

void EngineTest::RunCase(RankGroup::CaseFn fn, const nlohmann::json& arg) {
  absl::StatusOr<RankGroup*> group = RankGroup::Shared(GetParam().world_size, GetParam().backend);
  ASSERT_THAT(group, IsOk());
  nlohmann::json with_device = arg;
  with_device["device"] = GetParam().cuda ? "cuda" : "cpu";
  EXPECT_THAT((*group)->Run(fn, with_device.dump()), IsOk()) << with_device.dump();
}

std::vector<EngineParam> EngineParams(const std::string& backend, bool cuda,
                                      int (*device_count)()) {
  std::vector<EngineParam> params;
  for (int world : {1, 2, 3, 4, 7}) params.push_back({backend, world, cuda, device_count});
  return params;
}

std::string EngineParamName(const ::testing::TestParamInfo<EngineParam>& info) {
  return "world" + std::to_string(info.param.world_size);
}

}  // namespace shardkit::testing
