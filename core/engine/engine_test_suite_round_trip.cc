// The engine test suite (engine_test_suite.h), round trips: ShardParameter (scatter and broadcast,
// every dtype, chunk and enumerable specs, uneven and zero-size shards), then Gather and Reshard
// there and back, every byte compared with the source and the scatter's bytes on the wire counted.
#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine_test_suite.h"
#include "core/engine/engine_test_suite_util.h"
#include "core/engine/reshard.h"
#include "core/engine/shard_parameter.h"
#include "gmock/gmock.h"
#include "specs/plan.h"
#include "specs/spec_json.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

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

// Own shards of 1 MiB and more are copied on a second thread while the scatter runs (smaller
// ones first, on the calling thread): rows and columns, the source in the middle.
TEST_P(EngineTest, LargeOwnShardsWhileScattering) {
  const int world = GetParam().world_size;
  const Json placements = {{"ranks", "all"}, {"device", GetParam().cuda ? "cuda" : "cpu"}};
  for (int64_t dim : {0, 1}) {
    Json c = {{"shape", {2048, 1024}}, {"dtype", "float32"}, {"spec", Chunk(dim, placements)},
              {"strategy", "scatter"}, {"src", world / 2},   {"start", 3}};
    RunCase(&ShardGatherReshardCase, c);
    if (HasFatalFailure()) return;
  }
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

}  // namespace
}  // namespace shardkit::testing
