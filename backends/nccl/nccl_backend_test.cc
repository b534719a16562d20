// The NCCL backend beyond the conformance suite: the clean "no CUDA device" path (runs on every
// machine of the cuda configuration) and, with GPUs, CUDA tensors (copies host⇄device and
// device⇄device, Narrow/Clone on device) and ShardParameter from a CUDA source with Gather back.
// All CUDA work happens in forked children: this process never initialises CUDA.
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/nccl/cuda_util.h"
#include "core/base/status_macros.h"
#include "core/comm/backend_registry.h"
#include "core/comm/connect.h"
#include "core/engine/shard_parameter.h"
#include "core/engine/sync.h"
#include "core/tensor/allocator.h"
#include "core/tensor/tensor.h"
#include "gmock/gmock.h"
#include "specs/layout.h"
#include "specs/spec_json.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;

int CudaDevices() {
  static const int count = nccl_backend::CudaDeviceCountInChild();
  return count;
}

// The bytes of `t` (any device) as a host string.
std::string HostBytes(const Tensor& t) {
  absl::StatusOr<Tensor> host = Tensor::Empty(t.shape(), t.dtype());
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return "";
  SHARDKIT_EXPECT_OK(host->CopyFrom(t));
  return std::string(reinterpret_cast<const char*>(host->data()), host->nbytes());
}

absl::StatusOr<Tensor> ToDevice(const Tensor& t, const Device& device) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(t.shape(), t.dtype(), device));
  SHARDKIT_RETURN_IF_ERROR(out.CopyFrom(t));
  return out;
}

// `st`'s local shards are on cuda:rank, and its Gather into a CUDA tensor on rank 0 gives back
// `host`'s bytes.
void ExpectOnDeviceAndGathersTo(const ShardedTensor& st, const Tensor& host, int rank,
                                Communicator& comm) {
  const Device mine = Device::Cuda(rank);
  for (const LocalShard& shard : st.local_shards()) EXPECT_EQ(shard.tensor.device(), mine);
  Tensor out;
  if (rank == 0) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(out, Tensor::Empty(host.shape(), host.dtype(), mine));
  }
  SHARDKIT_ASSERT_OK(st.Gather(0, rank == 0 ? &out : nullptr, comm));
  if (rank == 0) {
    EXPECT_EQ(HostBytes(out), HostBytes(host));
  }
}

TEST(NcclWithoutDevice, ConnectAndAllocationReportNoCudaDevice) {
  if (CudaDevices() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    EXPECT_THAT(RegisteredBackends(), Contains("nccl"));
    ConnectOptions options;
    options.backend = "nccl";
    EXPECT_THAT(Connect(options),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA device")));
    EXPECT_THAT(Tensor::Empty({4}, DType::kFloat32, Device::Cuda()),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA device")));
    // The same binary still runs Gloo.
    options.backend = "gloo";
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Communicator> gloo, Connect(options));
    SHARDKIT_EXPECT_OK(gloo->Barrier());
  }));
}

TEST(NcclWithDevice, TensorCopiesNarrowAndCloneOnDevice) {
  if (CudaDevices() < 1) GTEST_SKIP() << "needs a CUDA device";
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor host, Tensor::Arange({6, 4}, DType::kInt32));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor dev, ToDevice(host, Device::Cuda(0)));
    EXPECT_EQ(HostBytes(dev), HostBytes(host));
    // A non-contiguous view on the device, cloned device→device and read back per run.
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor cols, dev.Narrow(1, 1, 2));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor clone, cols.Clone());
    EXPECT_EQ(clone.device(), Device::Cuda(0));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor host_cols, host.Narrow(1, 1, 2));
    EXPECT_EQ(HostBytes(clone), HostBytes(host_cols));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor zeros, Tensor::Zeros({3}, DType::kInt32, Device::Cuda()));
    EXPECT_EQ(HostBytes(zeros), std::string(12, '\0'));
  }));
}

// ShardParameter with a CUDA source on rank 0, one row block per rank on its own device, then
// Gather back into a CUDA tensor on rank 0: bit-exact. World size = the device count (max 4).
TEST(NcclWithDevice, ShardParameterFromCudaSourceAndGatherBack) {
  if (CudaDevices() < 1) GTEST_SKIP() << "needs a CUDA device";
  const int world = std::min(CudaDevices(), 4);
  SHARDKIT_EXPECT_OK(testing::RunRanks(world, "nccl", [](int rank, Communicator& comm) {
    const Device mine = Device::Cuda(rank);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor host, Tensor::Arange({8, 5}, DType::kFloat32));
    Module module;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(
        Tensor source, rank == 0 ? ToDevice(host, mine) : Tensor::Meta(host.shape(), host.dtype()));
    SHARDKIT_ASSERT_OK(module.AddParameter("w", source));
    std::string placements;
    for (int r = 0; r < comm.world_size(); ++r) {
      placements += absl::StrCat(r == 0 ? "" : ",", "\"rank:", r, "/cuda:", r, "\"");
    }
    SHARDKIT_ASSERT_OK_AND_ASSIGN(
        specs::ShardingSpec spec,
        specs::ParseSpec(
            absl::StrCat(R"({"type":"chunk","dim":0,"placements":[)", placements, "]}")));
    SHARDKIT_ASSERT_OK(ShardParameter(module, "w", spec, comm));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
    ExpectOnDeviceAndGathersTo(*st, host, rank, comm);
  }));
}

// Weight sync on devices: rows of an [8, 6] tensor on cuda:rank synced into columns on the same
// ranks (world = the device count, max 4; at 1 a device-to-device local copy), twice, Gather
// back: bit-exact.
TEST(NcclWithDevice, WeightSyncRowsToColumnsOnDevices) {
  if (CudaDevices() < 1) GTEST_SKIP() << "needs a CUDA device";
  const int world = std::min(CudaDevices(), 4);
  SHARDKIT_EXPECT_OK(testing::RunRanks(world, "nccl", [](int rank, Communicator& comm) {
    const Device mine = Device::Cuda(rank);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor host, Tensor::Arange({8, 6}, DType::kFloat32));
    auto side = [&](int dim, bool fill) -> absl::StatusOr<Module> {
      SHARDKIT_ASSIGN_OR_RETURN(
          specs::ShardingSpec spec,
          specs::ParseSpec(
              absl::StrCat(R"({"type":"chunk","dim":)", dim, R"(,"placements":{"ranks":"all"}})")));
      SHARDKIT_ASSIGN_OR_RETURN(
          ShardedTensor st,
          ShardedTensor::Zeros(host.shape(), host.dtype(), spec, comm.world_size(), rank, mine));
      for (const LocalShard& shard : st.local_shards()) {
        if (!fill) continue;
        SHARDKIT_ASSIGN_OR_RETURN(Tensor part, NarrowToShard(host, st.shards()[shard.index]));
        Tensor into = shard.tensor;
        SHARDKIT_RETURN_IF_ERROR(into.CopyFrom(part));
      }
      Module module;
      SHARDKIT_RETURN_IF_ERROR(module.AddParameter("w", Tensor()));
      SHARDKIT_RETURN_IF_ERROR(module.SetSharded("w", std::move(st)));
      return module;
    };
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Module rows, side(0, true));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Module columns, side(1, false));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(SyncPlan plan, PlanSync(&rows, &columns, {}, comm));
    for (int call = 0; call < 2; ++call) {
      SHARDKIT_ASSERT_OK(Sync(plan, &rows, &columns, comm, {.verify = true}));
    }
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, columns.GetSharded("w"));
    ExpectOnDeviceAndGathersTo(*st, host, rank, comm);
  }));
}

// A peer that dies mid-collective: the survivor gets kDeadlineExceeded or kUnavailable by its
// deadline (the NCCL communicator is aborted), never a hang, and the communicator is poisoned.
TEST(NcclWithDevice, DeadPeerFailsByTheDeadline) {
  if (CudaDevices() < 2) GTEST_SKIP() << "needs two CUDA devices";
  testing::RankOptions options;
  options.may_die = {1};
  options.timeout = absl::Seconds(3);
  SHARDKIT_EXPECT_OK(testing::RunRanks(
      2, "nccl",
      [](int rank, Communicator& comm) {
        if (rank == 1) raise(SIGKILL);
        SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor buffer,
                                      Tensor::Zeros({1024}, DType::kUInt8, Device::Cuda()));
        const absl::Time start = absl::Now();
        const absl::Status status = comm.Broadcast(
            MutableBuffer(buffer.data(), buffer.nbytes(), Device::Cuda()), /*root=*/1);
        EXPECT_THAT(status.code(), ::testing::AnyOf(absl::StatusCode::kDeadlineExceeded,
                                                    absl::StatusCode::kUnavailable));
        EXPECT_LT(absl::Now() - start, absl::Seconds(8));
        EXPECT_THAT(comm.Barrier(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                             HasSubstr("must be recreated")));
      },
      options));
}

}  // namespace
}  // namespace shardkit
