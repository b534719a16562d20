// The engine test suite (engine_test_suite.h), modules and groups: ShardModule with plans,
// AgreeOnPlan, ShardParameters with replicated parameters, sharding in a sub-group, and
// ShardedTensor::InitFromLocalShards.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine_test_suite.h"
#include "core/engine/engine_test_suite_util.h"
#include "core/engine/shard_parameter.h"
#include "gmock/gmock.h"
#include "specs/plan.h"
#include "specs/spec_json.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

using ::testing::HasSubstr;

// Shards inside a sub-group: ranks [world-1, 0] of the parent, src_rank 0 of the sub-group.
void SubgroupCase(int rank, Communicator& comm, std::string_view arg) {
  const Json c = Json::parse(arg);
  const int world = comm.world_size();
  std::vector<int> members = {world - 1, 0};
  if (world == 1) members = {0};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Communicator> sub, comm.Split(members));
  const bool member = rank == world - 1 || rank == 0;
  ASSERT_EQ(sub != nullptr, member);
  if (!member) return;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor expected, Tensor::Arange({5, 3}, DType::kInt32, 100));
  Module module;
  ASSERT_THAT(module.AddParameter("w", sub->rank() == 0 ? OnDevice(expected, RankDevice(c, rank))
                                                        : *Tensor::Meta({5, 3}, DType::kInt32)),
              testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      specs::ShardingSpec spec,
      specs::ParseSpec(R"({"type":"chunk","dim":1,"placements":{"ranks":"all"}})"));
  ASSERT_THAT(ShardParameter(module, "w", spec, *sub), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
  ExpectShardsOf(*st, expected, sub->rank());
}

// ShardParameters with a replicated and a sharded parameter; one commit.
void ReplicatedCase(int rank, Communicator& comm, std::string_view arg) {
  const Device here = RankDevice(Json::parse(arg), rank);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor bias, Tensor::Arange({7}, DType::kFloat16, 3));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor weight, Tensor::Arange({6, 2}, DType::kInt64, kBig));
  Module module;
  ASSERT_THAT(module.AddParameter(
                  "bias", rank == 0 ? OnDevice(bias, here) : *Tensor::Meta({7}, DType::kFloat16)),
              testing::IsOk());
  ASSERT_THAT(module.AddParameter("weight", rank == 0 ? OnDevice(weight, here)
                                                      : *Tensor::Meta({6, 2}, DType::kInt64)),
              testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      specs::ShardingSpec spec,
      specs::ParseSpec(R"({"type":"chunk","dim":0,"placements":{"ranks":"all"}})"));
  ASSERT_THAT(ShardParameters(module, {{"bias", std::nullopt}, {"weight", spec}}, comm),
              testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* got, module.GetTensor("bias"));
  EXPECT_TRUE(SameBytes(*got, bias));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("weight"));
  ExpectShardsOf(*st, weight, rank);
}

// ShardModule with a plan: rows, columns, enumerable (by "**") and replicated parameters; the
// command-line strategy overrides the plan's; a plan that fails on one parameter changes nothing.
// AgreeOnPlan with meta tensors on every rank (the source's too): layouts out, nothing moved or
// changed; a rank with another shape makes every rank fail the same way.
void AgreeOnPlanCase(int rank, Communicator& comm, std::string_view arg) {
  const int world = comm.world_size();
  const bool disagree = Json::parse(arg).value("disagree", false);
  Module module;
  const Shape w_shape = disagree && rank == world - 1 ? Shape{11, 4} : Shape{10, 4};
  ASSERT_THAT(module.AddParameter("w", *Tensor::Meta(w_shape, DType::kBFloat16)), testing::IsOk());
  ASSERT_THAT(module.AddParameter("b", *Tensor::Meta({3}, DType::kFloat32)), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(specs::Plan plan, specs::ParsePlan(R"({"rules": [{"match": "w",
      "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]})"));
  comm.ResetCounters();
  absl::StatusOr<std::vector<AgreedParameter>> agreed = AgreeOnPlan(module, plan, comm);
  if (disagree) {
    EXPECT_THAT(agreed, testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("parameters.w.shape")));
    return;
  }
  ASSERT_THAT(agreed, testing::IsOk());
  ASSERT_EQ(agreed->size(), 2u);
  EXPECT_EQ((*agreed)[0].name, "w");
  EXPECT_TRUE((*agreed)[0].spec.has_value());
  EXPECT_EQ((*agreed)[0].shards.size(), static_cast<size_t>(world));
  EXPECT_EQ((*agreed)[0].dtype, DType::kBFloat16);
  EXPECT_FALSE((*agreed)[1].spec.has_value()) << "b is replicated";
  EXPECT_EQ((*agreed)[1].spec_json, specs::kReplicatedJson);
  ASSERT_EQ((*agreed)[1].shards.size(), static_cast<size_t>(world));
  EXPECT_EQ((*agreed)[1].shards[0].sizes, Shape{3});
  for (CollectiveOp op : {CollectiveOp::kScatter, CollectiveOp::kBroadcast}) {
    EXPECT_EQ(comm.counters(op).calls, 0) << "no tensor data moves: " << CollectiveOpName(op);
  }
  EXPECT_FALSE(*module.IsSharded("w"));
}

void PlanCase(int rank, Communicator& comm, std::string_view arg) {
  const Device here = RankDevice(Json::parse(arg), rank);
  const int world = comm.world_size();
  const std::vector<std::pair<std::string, Shape>> params = {{"layers.0.attn.qkv.weight", {9, 4}},
                                                             {"layers.1.attn.qkv.weight", {9, 4}},
                                                             {"embed.weight", {5, 6}},
                                                             {"norm.bias", {6}},
                                                             {"head.proj.weight", {4, 4}}};
  Module module;
  std::vector<Tensor> expected;
  for (size_t i = 0; i < params.size(); ++i) {
    expected.push_back(*Tensor::Arange(params[i].second, DType::kFloat32, 100 * i));
    Tensor t = rank == 0 ? OnDevice(expected.back(), here)
                         : *Tensor::Meta(params[i].second, DType::kFloat32);
    ASSERT_THAT(module.AddParameter(params[i].first, t), testing::IsOk());
  }
  const std::string text = R"({"version": 1, "src_rank": 0, "strategy": "broadcast", "rules": [
      {"match": "layers.*.attn.qkv.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
      {"match": "embed.weight", "spec": {"type": "chunk", "dim": -1, "placements": {"ranks": "all"}}},
      {"match": "**.proj.weight", "spec": {"type": "enumerable", "shards": [
          {"offsets": [0, 0], "sizes": [4, 2], "placement": "rank:0"},
          {"offsets": [0, 2], "sizes": [4, 2], "placement": "rank:0"}]}}]})";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(specs::Plan plan, specs::ParsePlan(text));
  // A plan naming a rank outside the world fails on every rank and changes nothing.
  specs::Plan bad = plan;
  bad.rules[1].spec = *specs::ParseSpec(R"({"type":"chunk","dim":0,"placements":["rank:)" +
                                        std::to_string(world) + R"("]})");
  EXPECT_THAT(ShardModule(module, bad, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("embed.weight")));
  for (const auto& [name, shape] : params) EXPECT_FALSE(*module.IsSharded(name)) << name;

  comm.ResetCounters();
  ASSERT_THAT(ShardModule(module, plan, comm, {.strategy = Strategy::kScatter}), testing::IsOk());
  // The override won: the four sharded parameters went in one batched scatter.
  EXPECT_EQ(comm.counters(CollectiveOp::kScatter).calls, 1);
  EXPECT_EQ(comm.counters(CollectiveOp::kBroadcast).calls, 1);  // norm.bias, replicated
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].first == "norm.bias") {
      SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* t, module.GetTensor("norm.bias"));
      EXPECT_TRUE(SameBytes(*t, expected[i]));
      continue;
    }
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded(params[i].first));
    ExpectShardsOf(*st, expected[i], rank);
  }
}

// InitFromLocalShards: every rank offers one row block; then an overlapping offer fails everywhere.
void InitFromLocalShardsCase(int rank, Communicator& comm, std::string_view arg) {
  const int world = comm.world_size();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor full, Tensor::Arange({2 * world, 3}, DType::kInt16));
  specs::ShardMetadata meta{{2 * rank, 0}, {2, 3}, specs::Placement::ForRank(rank)};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor host_block, NarrowToShard(full, meta));
  const Tensor block = OnDevice(*host_block.Contiguous(), RankDevice(Json::parse(arg), rank));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardedTensor st, ShardedTensor::InitFromLocalShards({{meta, block}}, full.shape(), comm));
  EXPECT_EQ(st.shards().size(), static_cast<size_t>(world));
  ExpectShardsOf(st, full, rank);
  Tensor out;
  ASSERT_THAT(st.Gather(0, rank == 0 ? &out : nullptr, comm), testing::IsOk());
  if (rank == 0) {
    EXPECT_TRUE(SameBytes(out, full));
  }

  if (world == 1) return;
  specs::ShardMetadata overlapping{
      {rank == 1 ? 0 : 2 * rank, 0}, {2, 3}, specs::Placement::ForRank(rank)};
  auto bad = ShardedTensor::InitFromLocalShards({{overlapping, block}}, full.shape(), comm);
  EXPECT_THAT(bad, testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlap")));
}

TEST_P(EngineTest, SubgroupsPlansReplicationAndInit) {
  RunCase(&SubgroupCase, Json::object());
  RunCase(&PlanCase, Json::object());
  RunCase(&AgreeOnPlanCase, Json::object());
  if (GetParam().world_size > 1) RunCase(&AgreeOnPlanCase, Json{{"disagree", true}});
  RunCase(&ReplicatedCase, Json::object());
  RunCase(&InitFromLocalShardsCase, Json::object());
}

}  // namespace
}  // namespace shardkit::testing
