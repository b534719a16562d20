#include "integration/checkpoint/save_shards_fixture.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "core/engine/shard_parameter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace shardkit::checkpoint::save_fixture {

// The full value of parameter i, the same on every rank.
Tensor Full(size_t i) {
  return *Tensor::Arange(kParams[i].shape, kParams[i].dtype, static_cast<int64_t>(1000 * i + 1));
}

// The layout the module is saved with: rows, columns (7 over 4: uneven), an enumerable spec
// holding two shards on rank 0 (NAME#K in its file); norm.weight and cols.view replicated.
specs::Plan SavePlan() {
  return *specs::ParsePlan(R"({"rules": [
      {"match": "embed.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
      {"match": "layers.*.proj.weight", "spec": {"type": "chunk", "dim": 1,
                                                 "placements": {"ranks": "all"}}},
      {"match": "head.weight", "spec": {"type": "enumerable", "shards": [
          {"offsets": [0, 0], "sizes": [3, 4], "placement": "rank:0"},
          {"offsets": [3, 0], "sizes": [3, 2], "placement": "rank:1"},
          {"offsets": [3, 2], "sizes": [3, 2], "placement": "rank:0"}]}}]})");
}

// Another layout, for any world: rows <-> columns, the enumerable one replicated, norm.weight
// enumerable over the first and last rank.
specs::Plan LoadPlan(int world) {
  return *specs::ParsePlan(absl::StrCat(R"({"rules": [
      {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
      {"match": "layers.*.proj.weight", "spec": {"type": "chunk", "dim": 0,
                                                 "placements": {"ranks": "all"}}},
      {"match": "norm.weight", "spec": {"type": "enumerable", "shards": [
          {"offsets": [0], "sizes": [1], "placement": "rank:0"},
          {"offsets": [1], "sizes": [3], "placement": "rank:)",
                                        world - 1, R"("}]}}]})"));
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = *a.Contiguous(), y = *b.Contiguous();
  return std::equal(x.data(), x.data() + x.nbytes(), y.data(), y.data() + y.nbytes());
}

// Every slot holds exactly this rank's part of the full tensors under `plan` (replicated: whole).
void ExpectLoaded(const Module& module, int rank) {
  for (size_t i = 0; i < std::size(kParams); ++i) {
    const char* name = kParams[i].name;
    if (!*module.IsSharded(name)) {
      EXPECT_TRUE(SameBytes(**module.GetTensor(name), Full(i))) << name << " on rank " << rank;
      continue;
    }
    const ShardedTensor& st = **module.GetSharded(name);
    EXPECT_EQ(st.global_shape(), kParams[i].shape) << name;
    for (const LocalShard& shard : st.local_shards()) {
      EXPECT_EQ(st.shards()[shard.index].placement.rank(), rank) << name;
      EXPECT_TRUE(SameBytes(shard.tensor, *NarrowToShard(Full(i), st.shards()[shard.index])))
          << name << " shard " << shard.index << " on rank " << rank;
    }
  }
}

// A module of meta tensors of the global shapes and dtypes (what a loading program starts from).
Module MetaModule() {
  Module module;
  for (const Param& p : kParams) {
    EXPECT_THAT(module.AddParameter(p.name, *Tensor::Meta(p.shape, p.dtype)), testing::IsOk());
  }
  return module;
}

// The module sharded by SavePlan from full tensors; cols.view a non-contiguous view.
Module ShardedModule(Communicator& comm) {
  Module module;
  for (size_t i = 0; i + 1 < std::size(kParams); ++i) {
    EXPECT_THAT(module.AddParameter(kParams[i].name, Full(i)), testing::IsOk());
  }
  const absl::Status sharded = ShardModule(module, SavePlan(), comm);
  EXPECT_THAT(sharded, testing::IsOk()) << sharded;
  // Columns [1, 4) of a [5, 6] tensor whose column j + 1 holds cols.view's column j (ShardModule
  // sends contiguous tensors only: the view joins after it).
  Tensor wide = *Tensor::Zeros({5, 6}, DType::kInt16);
  EXPECT_THAT((*wide.Narrow(1, 1, 3)).CopyFrom(Full(4)), testing::IsOk());
  Tensor view = *wide.Narrow(1, 1, 3);
  EXPECT_FALSE(view.IsContiguous());
  EXPECT_THAT(module.AddParameter("cols.view", view), testing::IsOk());
  return module;
}

}  // namespace shardkit::checkpoint::save_fixture
