// //integration/checkpoint:save_shards used from outside integration/, as README.md tells
// programs to: a row-sharded parameter saved by two ranks and loaded back into a meta module.
#include <algorithm>
#include <string>
#include <string_view>

#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "core/engine/sharded_tensor.h"
#include "core/tensor/tensor.h"
#include "gtest/gtest.h"
#include "integration/checkpoint/save_shards.h"
#include "specs/plan.h"
#include "testing/multiprocess.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using checkpoint::LoadShards;
using checkpoint::SaveShards;

specs::Plan Rows() {
  return *specs::ParsePlan(
      R"({"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0,
                                            "placements": {"ranks": "all"}}}]})");
}

void SaveAndLoadCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  Module module;
  ASSERT_THAT(module.AddParameter("w", *Tensor::Arange({6, 5}, DType::kFloat32, 1)),
              testing::IsOk());
  ASSERT_THAT(ShardModule(module, Rows(), comm), testing::IsOk());
  ASSERT_THAT(SaveShards(dir, module, comm), testing::IsOk());
  Module loaded;
  ASSERT_THAT(loaded.AddParameter("w", *Tensor::Meta({6, 5}, DType::kFloat32)), testing::IsOk());
  ASSERT_THAT(LoadShards(dir, loaded, Rows(), comm), testing::IsOk());
  const ShardedTensor& saved = **module.GetSharded("w");
  const ShardedTensor& back = **loaded.GetSharded("w");
  ASSERT_EQ(back.local_shards().size(), 1u);
  const Tensor a = *saved.local_shards()[0].tensor.Contiguous();
  const Tensor b = *back.local_shards()[0].tensor.Contiguous();
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_TRUE(std::equal(a.data(), a.data() + a.nbytes(), b.data())) << "rank " << rank;
}

TEST(PublicLabels, SaveShardsAndLoadShards) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group, testing::RankGroup::Shared(2, "gloo"));
  EXPECT_THAT(group->Run(&SaveAndLoadCase, testing::FreshTestDir("public_save_shards")),
              testing::IsOk());
}

}  // namespace
}  // namespace shardkit
