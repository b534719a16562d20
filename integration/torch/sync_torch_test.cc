// Weight sync between LibTorch models on 4 forked Gloo ranks: trainers 0-1 shard a Linear(8, 6)
// by rows over their own communicator (ShardTorchModule), servers 2-3 allocate theirs by columns
// from a meta model (AllocateTorchModule); after each training step SyncTorch updates the
// servers' parameters in place (the same torch::Tensor objects), bit-exactly.
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/torch/shard_torch.h"
#include "specs/plan.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit::libtorch {
namespace {

specs::Plan WeightBy(int dim) {
  absl::StatusOr<specs::Plan> plan = specs::ParsePlan(
      std::string(R"({"rules": [{"match": "weight", "spec": {"type": "chunk", "dim": )") +
      std::to_string(dim) + R"(, "placements": {"ranks": "all"}}}]})");
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

torch::Tensor Weight(int step) { return torch::arange(48, torch::kFloat32).reshape({6, 8}) + step; }
torch::Tensor Bias(int step) { return torch::arange(6, torch::kFloat32) + 100 + step; }

// A Linear(8, 6)'s parameters, weight [6, 8] and bias [6]: step 0's values, or meta tensors.
std::shared_ptr<torch::nn::Module> Model(bool meta) {
  auto model = std::make_shared<torch::nn::Module>();
  if (meta) {
    const auto options = torch::dtype(torch::kFloat32).device(torch::kMeta);
    model->register_parameter("weight", torch::empty({6, 8}, options));
    model->register_parameter("bias", torch::empty({6}, options));
  } else {
    model->register_parameter("weight", Weight(0));
    model->register_parameter("bias", Bias(0));
  }
  return model;
}

void TrainersToServers(int rank, Communicator& comm) {
  const std::vector<int> trainer_ranks = {0, 1};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Communicator> trainers, comm.Split(trainer_ranks));
  const bool trainer = rank < 2;
  std::shared_ptr<torch::nn::Module> model = Model(/*meta=*/rank != 0);
  torch::Tensor weight = model->named_parameters()["weight"];
  torch::Tensor bias = model->named_parameters()["bias"];
  std::optional<TorchShards> mine;
  if (trainer) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(mine, ShardTorchModule(*model, WeightBy(0), *trainers));
  } else {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(mine, AllocateTorchModule(*model, WeightBy(1), 2, rank - 2));
    ASSERT_EQ(weight.sizes(), torch::IntArrayRef({6, 4}));
  }
  const auto* weight_impl = weight.unsafeGetTensorImpl();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      SyncPlan plan, PlanSyncTorch(trainer ? &*mine : nullptr, trainer ? nullptr : &*mine,
                                   {{0, 1}, {2, 3}}, comm));
  for (int step = 1; step <= 2; ++step) {
    if (trainer) {  // a training step on the shards
      torch::NoGradGuard no_grad;
      weight.add_(1.0f);
      bias.add_(1.0f);
    }
    SHARDKIT_ASSERT_OK(SyncTorch(plan, trainer ? &*mine : nullptr, trainer ? nullptr : &*mine, comm,
                                 {.verify = true}));
    if (!trainer) {
      EXPECT_EQ(model->named_parameters()["weight"].unsafeGetTensorImpl(), weight_impl);
      EXPECT_TRUE(torch::equal(weight, Weight(step).narrow(1, 4 * (rank - 2), 4)));
      EXPECT_TRUE(torch::equal(bias, Bias(step)));
    }
  }
}

// LibTorch reports errors by throwing; a rank must fail its case, not unwind into the fixture.
void CatchingTorch(int rank, Communicator& comm) {
  try {
    TrainersToServers(rank, comm);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "LibTorch threw: " << e.what();
  }
}

TEST(SyncTorch, TrainersUpdateServersInPlace) {
  SHARDKIT_EXPECT_OK(testing::RunRanks(4, "gloo", CatchingTorch));
}

}  // namespace
}  // namespace shardkit::libtorch
