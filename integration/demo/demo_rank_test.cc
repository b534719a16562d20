// Tests of the demo library: the synthetic model and built-in plan (every kind of spec, every
// world size) and RunDemoRank on real Gloo ranks with a small model. The summary the CLI lays out
// from a DemoReport is tested in integration/cli/demo_summary_test.cc.
#include "integration/demo/demo_rank.h"

#include <set>
#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/demo/synthetic_model.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit::demo {
namespace {

using testing::RankGroup;

constexpr SyntheticModelConfig kSmall = {.layers = 2, .hidden = 8, .vocab = 10, .positions = 4};

TEST(SyntheticModel, DefaultIsAboutFiftyParametersAndSixtyFourMiB) {
  const SyntheticModelConfig config;
  EXPECT_EQ(SyntheticParameters(config).size(), 53u);
  EXPECT_GT(SyntheticModelBytes(config), 60 << 20);
  EXPECT_LT(SyntheticModelBytes(config), 70 << 20);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Module meta, BuildSyntheticModel(config, false));
  EXPECT_EQ(meta.size(), 53u);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* head, meta.GetTensor("head.weight"));
  EXPECT_TRUE(head->is_meta());
}

TEST(SyntheticModel, ContentsAreExactAndDistinctPerParameter) {
  const std::vector<specs::ParameterInfo> params = SyntheticParameters(kSmall);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Module module, BuildSyntheticModel(kSmall, true));
  for (size_t i = 0; i < params.size(); ++i) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* t, module.GetTensor(params[i].name));
    const float* values = reinterpret_cast<const float*>(t->data());
    EXPECT_EQ(values[0], 1000.0f * i) << params[i].name;
    EXPECT_EQ(values[t->numel() - 1], 1000.0f * i + t->numel() - 1) << params[i].name;
  }
}

// The plan resolves on every world size and uses rows, columns, enumerable and replicated specs.
TEST(SyntheticModel, PlanMixesEverySpecOnEveryWorldSize) {
  for (int world : {1, 2, 3, 4, 7}) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(specs::Plan plan, specs::ParsePlan(DemoPlanJson({}, world)));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<specs::ResolvedParameter> resolved,
                                  specs::Resolve(plan, SyntheticParameters({}), world));
    std::set<std::string> kinds;
    for (const specs::ResolvedParameter& p : resolved) {
      if (!p.layout.spec.has_value()) {
        kinds.insert("replicated");
      } else if (const auto* c = std::get_if<specs::ChunkShardingSpec>(&*p.layout.spec)) {
        kinds.insert(c->dim == 0 ? "rows" : "columns");
      } else {
        kinds.insert("enumerable");
      }
    }
    EXPECT_THAT(kinds, ::testing::ElementsAre("columns", "enumerable", "replicated", "rows"))
        << "world " << world;
  }
}

void DemoCase(int rank, Communicator& comm, std::string_view arg) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DemoReport report, RunDemoRank(comm, {.model = kSmall}));
  EXPECT_TRUE(report.verified()) << "differing on rank 0: "
                                 << ::testing::PrintToString(report.mismatched);
  ASSERT_EQ(report.ranks.size(), static_cast<size_t>(comm.world_size()));
  EXPECT_EQ(report.parameters.size(), SyntheticParameters(kSmall).size());
  for (size_t r = 1; r < report.ranks.size(); ++r) {
    // Everything a non-source rank holds came over the wire (plus agreement digests).
    EXPECT_GE(report.ranks[r].shard_bytes_received, report.ranks[r].local_bytes) << "rank " << r;
    EXPECT_GT(report.ranks[r].peak_rss_bytes, 0);
  }
}

class DemoRankTest : public ::testing::TestWithParam<int> {};

TEST_P(DemoRankTest, ShardsGathersAndVerifies) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(GetParam(), "gloo"));
  SHARDKIT_EXPECT_OK(group->Run(&DemoCase));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DemoRankTest, ::testing::Values(1, 2, 3, 4, 7),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

}  // namespace
}  // namespace shardkit::demo
