// The engine test suite (engine_test_suite.h): ShardParameter, Gather, Reshard and AgreeOnStatus
// across forked ranks of a real backend (one group per world size runs every case). Each case is
// a JSON argument so that the forked ranks can run it; RunCase adds the suite's "device" to it.
#include "core/engine/engine_test_suite.h"

#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/comm/collective_status.h"
#include "core/engine/reshard.h"
#include "core/engine/shard_parameter.h"
#include "nlohmann/json.hpp"
#include "specs/plan.h"
#include "specs/spec_json.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kBig = (int64_t{1} << 53) + 1;  // int64 values a float64 would round

// The case's device on `rank` (of the parent group): the CPU, or that rank's own CUDA device.
Device RankDevice(const Json& c, int rank) {
  return c.value("device", "cpu") == "cpu" ? Device::Cpu() : Device::Cuda(rank);
}

// `t` copied to `device` (itself when it is there already or is meta).
Tensor OnDevice(const Tensor& t, const Device& device) {
  if (t.device() == device || t.is_meta()) return t;
  Tensor out = *Tensor::Empty(t.shape(), t.dtype(), device);
  EXPECT_TRUE(out.CopyFrom(t).ok());
  out.set_requires_grad(t.requires_grad());
  return out;
}

// A placement device suffix for list placements: "/cpu" or "/cuda:R".
std::string DeviceSuffix(const Json& c, int rank) { return "/" + RankDevice(c, rank).ToString(); }

// The tensor the source holds (on host): Arange, or a byte pattern (NaN payloads and all) for
// "bytes".
Tensor MakeSource(const Json& c) {
  const Shape shape = c["shape"].get<Shape>();
  const DType dtype = *ParseDType(c["dtype"].get<std::string>());
  if (c.value("fill", "") == "bytes") {
    auto size = ComputeShapeSize(shape, dtype);
    std::vector<std::byte> bytes(static_cast<size_t>(size->nbytes));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 31 + 7);
    return *Tensor::FromBytes(shape, dtype, bytes);
  }
  return *Tensor::Arange(shape, dtype, c.value("start", int64_t{0}));
}

// Compared on the host, whatever device either side is on.
bool SameBytes(const Tensor& a, const Tensor& b) {
  auto pa = OnDevice(a, Device::Cpu()).Contiguous();
  auto pb = OnDevice(b, Device::Cpu()).Contiguous();
  if (!pa.ok() || !pb.ok() || a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.nbytes() == 0 || std::memcmp(pa->data(), pb->data(), a.nbytes()) == 0;
}

// Every local shard equals the source's region; the global metadata lists every shard.
void ExpectShardsOf(const ShardedTensor& st, const Tensor& expected, int rank) {
  size_t mine = 0;
  for (const auto& shard : st.shards()) mine += shard.placement.rank() == rank;
  ASSERT_EQ(st.local_shards().size(), mine);
  for (const LocalShard& local : st.local_shards()) {
    auto region = NarrowToShard(expected, st.shards()[local.index]);
    ASSERT_TRUE(region.ok());
    EXPECT_TRUE(SameBytes(local.tensor, *region)) << "shard " << local.index << " on rank " << rank;
    EXPECT_EQ(local.tensor.requires_grad(), expected.requires_grad());
  }
}

void ShardGatherReshardCase(int rank, Communicator& comm, std::string_view arg) {
  const Json c = Json::parse(arg);
  const int src = c["src"].get<int>() % comm.world_size();
  Tensor expected = MakeSource(c);
  expected.set_requires_grad(c.value("requires_grad", false));
  Tensor mine = OnDevice(expected, RankDevice(c, rank));
  if (rank != src) {  // non-sources start from a meta tensor or from different contents
    mine = c.value("meta", true)
               ? *Tensor::Meta(expected.shape(), expected.dtype())
               : OnDevice(*Tensor::Arange(expected.shape(), expected.dtype(), 555 * rank),
                          RankDevice(c, rank));
    mine.set_requires_grad(expected.requires_grad());
  }
  Module module;
  ASSERT_THAT(module.AddParameter("w", mine), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(specs::ShardingSpec spec, specs::ParseSpec(c["spec"].dump()));
  ShardOptions options;
  options.src_rank = src;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(options.strategy,
                                specs::ParseStrategy(c["strategy"].get<std::string>()));
  comm.ResetCounters();
  ASSERT_THAT(ShardParameter(module, "w", spec, comm, options), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
  ExpectShardsOf(*st, expected, rank);
  EXPECT_EQ(st->global_shape(), expected.shape());

  // Bytes on the wire: scatter moves exactly the shard bytes; broadcast the whole tensor.
  const int64_t total = expected.nbytes();
  const OpCounters scatter = comm.counters(CollectiveOp::kScatter);
  const OpCounters bcast = comm.counters(CollectiveOp::kBroadcast);
  if (options.strategy == Strategy::kScatter) {
    if (rank == src) {
      EXPECT_EQ(scatter.bytes_sent, total - st->local_nbytes());
    } else {
      EXPECT_EQ(scatter.bytes_received, st->local_nbytes());
    }
    EXPECT_EQ(bcast.bytes_received + bcast.bytes_sent, 0);
  } else if (comm.world_size() > 1) {
    EXPECT_EQ(rank == src ? bcast.bytes_sent : bcast.bytes_received,
              rank == src ? total * (comm.world_size() - 1) : total);
  }

  // Gather reproduces the source bit for bit, on another rank than the source.
  const int dst = (src + 1) % comm.world_size();
  Tensor out;
  ASSERT_THAT(st->Gather(dst, rank == dst ? &out : nullptr, comm), testing::IsOk());
  if (rank == dst) {
    EXPECT_TRUE(SameBytes(out, expected)) << "gather on rank " << dst;
  }

  if (c.contains("reshard")) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(specs::ShardingSpec to, specs::ParseSpec(c["reshard"].dump()));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardedTensor moved, Reshard(*st, to, comm));
    ExpectShardsOf(moved, expected, rank);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardedTensor back, Reshard(moved, st->spec(), comm));
    ExpectShardsOf(back, expected, rank);
  }
}

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

}  // namespace

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
  Json with_device = arg;
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

namespace {

Json Chunk(int64_t dim, Json placements) {
  return {{"type", "chunk"}, {"dim", dim}, {"placements", std::move(placements)}};
}

// Placement lists over `world` ranks: all in order, reversed, without rank 0, rank 0 twice (the
// first and third name the suite's device, the others leave it to the backend's default).
std::vector<Json> PlacementVariants(int world, const Json& c) {
  std::vector<Json> variants = {Json{{"ranks", "all"}, {"device", c["device"]}}};
  Json reversed = Json::array(), absent = Json::array(), twice = Json::array();
  for (int r = world - 1; r >= 0; --r) reversed.push_back("rank:" + std::to_string(r));
  for (int r = 1; r < world; ++r) {
    absent.push_back("rank:" + std::to_string(r) + DeviceSuffix(c, r));
  }
  for (int r = 0; r < world; ++r) twice.push_back("rank:" + std::to_string(r));
  twice.push_back("rank:0");
  variants.push_back(reversed);
  if (world > 1) variants.push_back(absent);
  variants.push_back(twice);
  return variants;
}

TEST_P(EngineTest, ShardGatherReshardSweep) {
  const int world = GetParam().world_size;
  const Json device = {{"device", GetParam().cuda ? "cuda" : "cpu"}};
  const std::vector<Json> shapes = {{12, 4}, {3, 5}, {0, 6}, {13, 7}};
  for (const Json& shape : shapes) {
    for (int64_t dim : {0, 1, -1}) {
      for (const Json& placements : PlacementVariants(world, device)) {
        for (const char* strategy : {"scatter", "broadcast"}) {
          Json c = {{"shape", shape},       {"dtype", "float32"}, {"spec", Chunk(dim, placements)},
                    {"strategy", strategy}, {"src", world - 1},   {"start", 1}};
          c["reshard"] = Chunk(dim == 0 ? 1 : 0, Json{{"ranks", "all"}});
          RunCase(&ShardGatherReshardCase, c);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(EngineTest, DTypesAreMovedBitExactly) {
  const int world = GetParam().world_size;
  for (DType dtype : kAllDTypes) {
    Json c = {{"shape", {5, 3}},
              {"dtype", DTypeName(dtype)},
              {"spec", Chunk(1, Json{{"ranks", "all"}})},
              {"strategy", "scatter"},
              {"src", 0},
              {"fill", "bytes"},
              {"meta", false},
              {"requires_grad", true}};
    RunCase(&ShardGatherReshardCase, c);
  }
  Json big = {
      {"shape", {9}},          {"dtype", "int64"}, {"spec", Chunk(0, Json{{"ranks", "all"}})},
      {"strategy", "scatter"}, {"src", world / 2}, {"start", kBig}};
  RunCase(&ShardGatherReshardCase, big);
}

TEST_P(EngineTest, EnumerableSpecWithSeveralShardsPerRank) {
  const int world = GetParam().world_size;
  Json shards = Json::array();
  for (int i = 0; i < 4; ++i) {
    shards.push_back({{"offsets", {5 * (i / 2), 5 * (i % 2)}},
                      {"sizes", {5, 5}},
                      {"placement", "rank:" + std::to_string(i % world)}});
  }
  Json c = {{"shape", {10, 10}},
            {"dtype", "bfloat16"},
            {"spec", {{"type", "enumerable"}, {"shards", shards}}},
            {"strategy", "scatter"},
            {"src", 0},
            {"fill", "bytes"},
            {"reshard", Chunk(0, Json{{"ranks", "all"}})}};
  RunCase(&ShardGatherReshardCase, c);
  c["strategy"] = "broadcast";
  RunCase(&ShardGatherReshardCase, c);
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

TEST_P(EngineTest, SubgroupsReplicationInitAndGatherErrors) {
  RunCase(&SubgroupCase, Json::object());
  RunCase(&DirectRefusedCase, Json::object());
  RunCase(&PlanCase, Json::object());
  RunCase(&ForeignDeviceCase, Json::object());
  RunCase(&AgreeOnPlanCase, Json::object());
  if (GetParam().world_size > 1) RunCase(&AgreeOnPlanCase, Json{{"disagree", true}});
  RunCase(&ReplicatedCase, Json::object());
  RunCase(&InitFromLocalShardsCase, Json::object());
  RunCase(&GatherErrorCase, Json::object());
}

TEST_P(EngineTest, AgreeOnStatusGroupsRanksByMessage) {
  RunCase(&AgreeOnStatusCase, Json::object());
}

}  // namespace
}  // namespace shardkit::testing
