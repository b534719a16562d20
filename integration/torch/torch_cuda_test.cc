// CUDA tensors through LibTorch 2.x and the NCCL plugin (torch_tensor.h, shard_torch.h): ToTorch /
// FromTorch of cuda:N tensors zero-copy, and ShardTorchModule of CUDA parameters on 1 and 2 ranks
// (one device per rank), with an optimizer step and a Gather afterwards. Needs GPUs: cases whose
// world is larger than the device count skip, so without a GPU every case skips. All CUDA work
// happens in forked children: this process never initialises CUDA.
#include <torch/torch.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "backends/nccl/cuda_util.h"
#include "core/comm/communicator.h"
#include "core/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/torch/shard_torch.h"
#include "integration/torch/torch_tensor.h"
#include "specs/plan.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit::libtorch {
namespace {

int CudaDevices() {
  static const int count = nccl_backend::CudaDeviceCountInChild();
  return count;
}

// `t` on the host, for comparisons.
torch::Tensor Host(const Tensor& t) {
  absl::StatusOr<torch::Tensor> view = ToTorch(t);
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? view->cpu() : torch::Tensor();
}

TEST(TorchCuda, ToTorchAndFromTorchShareDeviceMemory) {
  if (CudaDevices() < 1) GTEST_SKIP() << "needs a CUDA device";
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    ASSERT_TRUE(torch::cuda::is_available());
    const auto f32 = torch::dtype(torch::kFloat32);
    torch::Tensor t = torch::arange(12, f32.device(torch::kCUDA, 0)).reshape({3, 4});
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor view, FromTorch(t));
    EXPECT_EQ(view.device(), Device::Cuda(0));
    EXPECT_EQ(view.data(), t.data_ptr());
    SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor back, ToTorch(view));
    EXPECT_EQ(back.device(), torch::Device(torch::kCUDA, 0));
    EXPECT_EQ(back.data_ptr(), t.data_ptr());
    back.mul_(2);  // a LibTorch CUDA kernel on the shared memory, seen through all three
    EXPECT_TRUE(torch::equal(Host(view), torch::arange(12, f32).reshape({3, 4}) * 2));
    // Memory from shardkit's CUDA allocator (the NCCL plugin's) on plain `cuda`: LibTorch names
    // the device that owns it, and its kernels write it.
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor own, Tensor::Empty({5}, DType::kFloat32, Device::Cuda()));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor as_torch, ToTorch(own));
    EXPECT_EQ(as_torch.device(), torch::Device(torch::kCUDA, 0));
    as_torch.fill_(3);
    EXPECT_TRUE(torch::equal(Host(own), torch::full({5}, 3.0f)));
    // A strided view keeps its strides, still zero-copy.
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor column, FromTorch(t.select(1, 1)));
    EXPECT_EQ(column.strides(), Shape({4}));
    EXPECT_TRUE(torch::equal(Host(column), torch::tensor({2.0f, 10.0f, 18.0f})));
  }));
}

// rank r's device, cuda:r, for every tensor of the spec.
const std::string kPlan = R"({"rules": [{"match": "weight", "spec": {"type": "chunk", "dim": 0,
    "placements": {"ranks": "all", "device": "cuda"}}}]})";

torch::Tensor Weight() { return torch::arange(48, torch::kFloat32).reshape({6, 8}); }

// Rank 0's Linear(8, 6) holds the data on cuda:0; the others' are meta. After sharding, every
// rank's weight is its rows on cuda:rank (the same TensorImpl), the bias is replicated there, an
// SGD step built before runs on the shard, and Gather sees it.
void ShardCudaModule(int rank, Communicator& comm) {
  const int world = comm.world_size();
  torch::nn::Linear model(8, 6);
  if (rank == 0) {
    model->to(torch::Device(torch::kCUDA, 0));
    torch::NoGradGuard no_grad;
    model->weight.copy_(Weight());
    model->bias.copy_(torch::arange(6, torch::kFloat32) + 100);
  } else {
    model->to(torch::kMeta);
  }
  const auto* impl = model->weight.unsafeGetTensorImpl();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.5));
  absl::StatusOr<specs::Plan> plan = specs::ParsePlan(kPlan);
  SHARDKIT_ASSERT_OK(plan.status());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TorchShards shards, ShardTorchModule(*model, *plan, comm));
  const int64_t rows = 6 / world;
  EXPECT_EQ(model->weight.unsafeGetTensorImpl(), impl);
  EXPECT_EQ(model->weight.device(), torch::Device(torch::kCUDA, rank));
  EXPECT_EQ(model->bias.device(), torch::Device(torch::kCUDA, rank));
  EXPECT_TRUE(model->weight.requires_grad());
  EXPECT_TRUE(torch::equal(model->weight.cpu(), Weight().narrow(0, rows * rank, rows)));
  EXPECT_TRUE(torch::equal(model->bias.cpu(), torch::arange(6, torch::kFloat32) + 100));
  // Autograd and the optimizer on the shard: d(sum(2w))/dw = 2, so w -= 0.5 * 2.
  (model->weight * 2).sum().backward();
  sgd.step();
  torch::cuda::synchronize();  // the stream rule: LibTorch's work done before shardkit's call
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, shards.module.GetSharded("weight"));
  Tensor full;
  SHARDKIT_ASSERT_OK(st->Gather(0, rank == 0 ? &full : nullptr, comm));
  if (rank == 0) {
    EXPECT_TRUE(torch::equal(Host(full), Weight() - 1));
  }
}

class TorchCudaShard : public ::testing::TestWithParam<int> {};

TEST_P(TorchCudaShard, ModuleOnDevicesThroughNccl) {
  const int world = GetParam();
  if (CudaDevices() < world) GTEST_SKIP() << "needs " << world << " CUDA devices";
  SHARDKIT_EXPECT_OK(testing::RunRanks(world, "nccl", ShardCudaModule));
}

INSTANTIATE_TEST_SUITE_P(Worlds, TorchCudaShard, ::testing::Values(1, 2),
                         [](const auto& info) { return absl::StrCat("World", info.param); });

}  // namespace
}  // namespace shardkit::libtorch
