// The engine test suite (engine_test_suite.h), cross-rank errors: disagreements and local problems
// of one rank fail every rank with the same message and leave the module unchanged; refused
// strategies and devices; Gather's `out` checked collectively; AgreeOnStatus's grouping.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/comm/collective_status.h"
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

// Runs ShardParameter with one rank's input changed as `c["bad"]` says; every rank must fail with
// the same message, and the module must be unchanged.
void DisagreementCase(int rank, Communicator& comm, std::string_view arg) {
  const Json c = Json::parse(arg);
  const int world = comm.world_size();
  const int odd = world - 1;  // the rank whose input differs
  const std::string bad = c["bad"].get<std::string>();
  Shape shape = {12, 4};
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
  ShardOptions options;
  const std::string device = c.value("device", "cpu");
  Json spec_json = {
      {"type", "chunk"}, {"dim", 0}, {"placements", {{"ranks", "all"}, {"device", device}}}};
  if (rank == odd) {
    if (bad == "src_rank") options.src_rank = odd;
    if (bad == "shape") shape = {11, 4};
    if (bad == "dtype") dtype = DType::kFloat64;
    if (bad == "requires_grad") requires_grad = true;
    if (bad == "strategy") options.strategy = Strategy::kBroadcast;
    if (bad == "spec") spec_json["dim"] = 1;
  }
  const Device here = RankDevice(c, rank);
  Tensor t =
      rank == 0 ? OnDevice(*Tensor::Arange(shape, dtype), here) : *Tensor::Meta(shape, dtype);
  if (bad == "source_meta" && rank == 0) t = *Tensor::Meta(shape, dtype);
  if (bad == "noncontiguous" && rank == 0) {
    t = *OnDevice(*Tensor::Arange({12, 8}, dtype), here).Narrow(1, 0, 4);
  }
  if (bad == "dim_out_of_range" && rank == odd) spec_json["dim"] = 2;
  if (bad == "foreign_placement" && rank == odd) {  // a device the backend cannot move
    spec_json["placements"] = {{"ranks", "all"}, {"device", device == "cpu" ? "cuda" : "cpu"}};
  }
  t.set_requires_grad(requires_grad);
  Module module;
  if (!(bad == "missing" && rank == odd)) {
    ASSERT_THAT(module.AddParameter("w", t), testing::IsOk());
  }
  auto spec = specs::ParseSpec(spec_json.dump());
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::Status status = ShardParameter(module, "w", *spec, comm, options);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(c["expect"].get<std::string>()));
  const bool source_problem = bad == "source_meta" || bad == "noncontiguous";
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("rank " + std::to_string(source_problem ? 0 : odd)));
  // The same message on every rank (the communicator is still usable after argument errors).
  auto all = comm.AllGather(
      ConstBuffer(std::string_view(status.message().data(), status.message().size())));
  ASSERT_TRUE(all.ok()) << all.status();
  for (const std::string& m : *all) EXPECT_EQ(m, (*all)[0]);
  if (module.Contains("w")) {  // unchanged
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* still, module.GetTensor("w"));
    EXPECT_EQ(still->storage(), t.storage());
  }
}

// Strategy kDirect reads files, not tensors: every rank refuses it, the same way, module unchanged.
void DirectRefusedCase(int rank, Communicator& comm, std::string_view arg) {
  const Json c = Json::parse(arg);
  Tensor t = rank == 0 ? OnDevice(*Tensor::Arange({4, 2}, DType::kFloat32), RankDevice(c, rank))
                       : *Tensor::Meta({4, 2}, DType::kFloat32);
  Module module;
  ASSERT_THAT(module.AddParameter("w", t), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      specs::ShardingSpec spec,
      specs::ParseSpec(R"({"type":"chunk","dim":0,"placements":{"ranks":"all"}})"));
  absl::Status status =
      ShardParameter(module, "w", spec, comm, ShardOptions{.strategy = Strategy::kDirect});
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("parameter \"w\": strategy \"direct\" has every rank read its own"));
  auto all = comm.AllGather(
      ConstBuffer(std::string_view(status.message().data(), status.message().size())));
  ASSERT_TRUE(all.ok()) << all.status();
  for (const std::string& m : *all) EXPECT_EQ(m, (*all)[0]);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* still, module.GetTensor("w"));
  EXPECT_EQ(still->storage(), t.storage());
}

// Every rank's plan places "w" on a device the backend cannot move (cuda on Gloo, cpu on NCCL):
// ShardModule fails on every rank with the backend's capability, not a disagreement; AgreeOnPlan,
// which places nothing in memory, accepts the plan and keeps the placements as written.
void ForeignDeviceCase(int rank, Communicator& comm, std::string_view arg) {
  const Json c = Json::parse(arg);
  const std::string foreign = c.value("device", "cpu") == "cpu" ? "cuda" : "cpu";
  const Tensor t = rank == 0 ? OnDevice(*Tensor::Arange({4, 2}, DType::kFloat32), RankDevice(c, 0))
                             : *Tensor::Meta({4, 2}, DType::kFloat32);
  Module module;
  ASSERT_THAT(module.AddParameter("w", t), testing::IsOk());
  const Json spec = {
      {"type", "chunk"}, {"dim", 0}, {"placements", {{"ranks", "all"}, {"device", foreign}}}};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      specs::Plan plan,
      specs::ParsePlan(Json{{"rules", Json::array({{{"match", "w"}, {"spec", spec}}})}}.dump()));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<AgreedParameter> agreed,
                                AgreeOnPlan(module, plan, comm));
  ASSERT_EQ(agreed.size(), 1u);
  EXPECT_EQ(agreed[0].shards[0].placement.ToString(), "rank:0/" + foreign);
  const absl::Status status = ShardModule(module, plan, comm);
  const std::string expected =
      absl::StrCat("backend ", comm.backend(), " cannot move ", foreign,
                   " memory: parameter \"w\" is placed on rank:0/", foreign,
                   " (a capability of the backend, not a disagreement)");
  EXPECT_THAT(status, testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(expected)));
  EXPECT_THAT(std::string(status.message()), ::testing::Not(HasSubstr("do not agree")));
  EXPECT_FALSE(*module.IsSharded("w"));
}

// Gather's `out` is validated collectively: the same error on every rank.
void GatherErrorCase(int rank, Communicator& comm, std::string_view arg) {
  const Device here = RankDevice(Json::parse(arg), rank);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor full, Tensor::Arange({4}, DType::kUInt8));
  Module module;
  ASSERT_THAT(module.AddParameter("w", OnDevice(full, here)), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      specs::ShardingSpec spec,
      specs::ParseSpec(R"({"type":"chunk","dim":0,"placements":{"ranks":"all"}})"));
  ASSERT_THAT(ShardParameter(module, "w", spec, comm), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
  Tensor wrong = *Tensor::Zeros({5}, DType::kUInt8, here);
  EXPECT_THAT(st->Gather(0, rank == 0 ? &wrong : nullptr, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 0: out is")));
  if (comm.world_size() == 1) return;
  Tensor out;
  // Non-null `out` on every rank: ranks 1.. fail alike and are named once.
  const std::map<int, std::string> others = {
      {2, "rank 1"}, {3, "ranks 1, 2"}, {4, "ranks 1-3"}, {7, "ranks 1-6"}};
  EXPECT_THAT(st->Gather(0, &out, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("Gather: " + others.at(comm.world_size()) +
                                          ": out must be nullptr on ranks other than dst 0")));
}

// AgreeOnStatus names each distinct message once with its ranks (ordered by the lowest rank that
// reported it) and returns the same Status, with the lowest failing rank's code, on every rank.
void AgreeOnStatusCase(int rank, Communicator& comm, std::string_view arg) {
  const int world = comm.world_size();
  EXPECT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "ctx"), testing::IsOk());
  const std::map<int, std::string> everyone = {
      {1, "rank 0"}, {2, "ranks 0, 1"}, {3, "ranks 0-2"}, {4, "ranks 0-3"}, {7, "ranks 0-6"}};
  EXPECT_THAT(AgreeOnStatus(comm, absl::DataLossError("same"), "ctx"),
              testing::StatusIs(absl::StatusCode::kDataLoss,
                                ::testing::StrEq("ctx: " + everyone.at(world) + ": same")));
  // Rank 0 succeeds, rank 4 reports "bad shape", the others "disk full" (rank 1 with its own code).
  absl::Status local = absl::OkStatus();
  if (rank == 1) local = absl::FailedPreconditionError("disk full");
  if (rank > 1) local = absl::InvalidArgumentError(rank == 4 ? "bad shape" : "disk full");
  const std::map<int, std::string> mixed = {
      {2, "ctx: rank 1: disk full"},
      {3, "ctx: ranks 1, 2: disk full"},
      {4, "ctx: ranks 1-3: disk full"},
      {7, "ctx: ranks 1-3, 5, 6: disk full; rank 4: bad shape"}};
  const absl::Status agreed = AgreeOnStatus(comm, local, "ctx");
  if (world == 1) {
    EXPECT_THAT(agreed, testing::IsOk());
    return;
  }
  EXPECT_THAT(agreed, testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                        ::testing::StrEq(mixed.at(world))));
}

TEST_P(EngineTest, DisagreementsFailTheSameWayOnEveryRank) {
  if (GetParam().world_size == 1) GTEST_SKIP() << "needs two ranks to disagree";
  const std::string foreign = GetParam().cuda ? "cpu" : "cuda";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"src_rank", "src_rank is"},
      {"shape", "parameters.w.shape"},
      {"dtype", "parameters.w.dtype is \"float64\""},
      {"requires_grad", "parameters.w.requires_grad is true"},
      {"strategy", "strategy is \"broadcast\""},
      {"spec", "parameters.w.spec"},
      {"missing", "parameter \"w\": module has no parameter"},
      {"dim_out_of_range", "parameter \"w\": "},
      {"foreign_placement", "cannot move " + foreign + " memory"},
      {"source_meta", "rank 0: parameter \"w\": the source rank holds a meta tensor"},
      {"noncontiguous", "not a contiguous Tensor"},
  };
  for (const auto& [bad, expect] : cases) {
    RunCase(&DisagreementCase, Json{{"bad", bad}, {"expect", expect}});
  }
}

TEST_P(EngineTest, RefusalsAndGatherErrors) {
  RunCase(&DirectRefusedCase, Json::object());
  RunCase(&ForeignDeviceCase, Json::object());
  RunCase(&GatherErrorCase, Json::object());
}

TEST_P(EngineTest, AgreeOnStatusGroupsRanksByMessage) {
  RunCase(&AgreeOnStatusCase, Json::object());
}

}  // namespace
}  // namespace shardkit::testing
