// The engine test suite: ShardParameter (scatter and broadcast, every dtype, chunk and enumerable
// specs, uneven and zero-size shards), ShardModule with plans, AgreeOnPlan, Gather, Reshard,
// InitFromLocalShards, sub-groups and the cross-rank errors, over forked ranks of a real backend.
// Every backend instantiates it (link :engine_test_suite, which is alwayslink):
//
//   INSTANTIATE_TEST_SUITE_P(Gloo, EngineTest, ::testing::ValuesIn(EngineParams("gloo")),
//                            EngineParamName);
//
// A device backend puts the cases' tensors and placements on each rank's own CUDA device
// (cuda:rank, the device RankConnectOptions gives the rank) and passes a device counter: world
// sizes above it skip, so without a GPU every case skips (backends/nccl/nccl_engine_test.cc).
#ifndef SHARDKIT_CORE_ENGINE_ENGINE_TEST_SUITE_H_
#define SHARDKIT_CORE_ENGINE_ENGINE_TEST_SUITE_H_

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/rank_group.h"

namespace shardkit::testing {

struct EngineParam {
  std::string backend;
  int world_size = 1;
  bool cuda = false;  // tensors and placements on cuda:rank instead of the CPU
  // For device backends: how many devices this machine has. Called in the test process; must not
  // initialise CUDA there (probe in a child).
  int (*device_count)() = nullptr;
};

// World sizes 1, 2, 3, 4 and 7 of `backend`.
std::vector<EngineParam> EngineParams(const std::string& backend, bool cuda = false,
                                      int (*device_count)() = nullptr);

// "world4"
std::string EngineParamName(const ::testing::TestParamInfo<EngineParam>& info);

class EngineTest : public ::testing::TestWithParam<EngineParam> {
 protected:
  void SetUp() override;  // skips world sizes above the device count
  // Runs `fn` on the binary-wide group of this world size, with arg["device"] set.
  void RunCase(RankGroup::CaseFn fn, const nlohmann::json& arg);
};

}  // namespace shardkit::testing

#endif  // SHARDKIT_CORE_ENGINE_ENGINE_TEST_SUITE_H_
