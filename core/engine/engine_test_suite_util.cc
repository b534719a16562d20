#include "core/engine/engine_test_suite_util.h"

#include <cstring>

#include "gtest/gtest.h"

namespace shardkit::testing {

Device RankDevice(const Json& c, int rank) {
  return c.value("device", "cpu") == "cpu" ? Device::Cpu() : Device::Cuda(rank);
}

Tensor OnDevice(const Tensor& t, const Device& device) {
  if (t.device() == device || t.is_meta()) return t;
  absl::StatusOr<Tensor> out = t.Clone(device);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : t;
}

std::string DeviceSuffix(const Json& c, int rank) { return "/" + RankDevice(c, rank).ToString(); }

bool SameBytes(const Tensor& a, const Tensor& b) {
  auto pa = OnDevice(a, Device::Cpu()).Contiguous();
  auto pb = OnDevice(b, Device::Cpu()).Contiguous();
  if (!pa.ok() || !pb.ok() || a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.nbytes() == 0 || std::memcmp(pa->data(), pb->data(), a.nbytes()) == 0;
}

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

}  // namespace shardkit::testing
