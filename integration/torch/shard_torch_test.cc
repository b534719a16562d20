// ShardTorchModule, ShardTorchTensors and the shard-directory forms on 3 real ranks (forked
// processes, Gloo over TCP on 127.0.0.1). The parent process never touches LibTorch before forking.
#include "integration/torch/shard_torch.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "specs/plan.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::libtorch {
namespace {

using ::shardkit::testing::RankGroup;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kWorld = 3;

specs::Plan MustParsePlan(const std::string& json) {
  absl::StatusOr<specs::Plan> plan = specs::ParsePlan(json);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : specs::Plan{};
}

std::string Chunk(int dim) {
  return absl::StrCat(R"({"type": "chunk", "dim": )", dim,
                      R"(, "placements": {"ranks": "all", "device": "cpu"}})");
}

// A two-level model: layers.0.fc (weight [7, 4], bias [7]), embed [5, 6], buffer layers.0.scale.
struct Layer : torch::nn::Module {
  Layer() {
    fc = register_module("fc", torch::nn::Linear(4, 7));
    scale = register_buffer("scale", torch::zeros({4}));
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale;
};

struct Model : torch::nn::Module {
  Model() {
    layers = register_module("layers", torch::nn::ModuleList());
    layers->push_back(std::make_shared<Layer>());
    embed = register_parameter("embed", torch::zeros({5, 6}));
  }
  torch::nn::ModuleList layers{nullptr};
  torch::Tensor embed;
};

// Each tensor's offset in FillSource.
float Base(const std::string& name) {
  const std::vector<std::string> order = {"layers.0.fc.weight", "layers.0.fc.bias", "embed",
                                          "layers.0.scale"};
  return 1000.0f * (std::find(order.begin(), order.end(), name) - order.begin());
}

// The value every source tensor holds: arange plus Base(name).
void FillSource(Model& model, int rank) {
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : NamedTensorsOf(model)) {
    if (rank == 0) {
      t.copy_(torch::arange(t.numel(), torch::kFloat32).reshape(t.sizes()) + Base(name));
    }
  }
}

// A module whose children `names` each hold `weight` as their parameter "weight".
std::unique_ptr<torch::nn::Module> WithWeights(const std::vector<std::string>& names,
                                               const torch::Tensor& weight) {
  auto module = std::make_unique<torch::nn::Module>();
  for (const std::string& name : names) {
    auto child = std::make_shared<torch::nn::Module>();
    child->register_parameter("weight", weight);
    module->register_module(name, child);
  }
  return module;
}

// Every rank's message, to check that all ranks failed alike.
std::vector<std::string> AllMessages(Communicator& comm, const absl::Status& status) {
  const std::string mine(status.message());
  absl::StatusOr<std::vector<std::string>> all = comm.AllGather(ConstBuffer(mine));
  EXPECT_TRUE(all.ok()) << all.status();
  return all.ok() ? *all : std::vector<std::string>{};
}

const std::string kModelPlan =
    absl::StrCat(R"({"rules": [{"match": "layers.*.fc.weight", "spec": )", Chunk(0),
                 R"(}, {"match": "embed", "spec": )", Chunk(1),
                 R"(}, {"match": "**.scale", "spec": )", Chunk(0), "}]}");

void ModuleShardsInPlace(int rank, Communicator& comm, std::string_view) {
  Model model;
  FillSource(model, rank);
  torch::Tensor weight = model.layers[0]->as<Layer>()->fc->weight;
  const auto* impl = weight.unsafeGetTensorImpl();
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.5));  // built before
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TorchShards shards,
                                ShardTorchModule(model, MustParsePlan(kModelPlan), comm));
  // The same object, now this rank's rows [3r, 3r + 3) of 7 (rank 2: one row).
  torch::Tensor now = model.named_parameters()["layers.0.fc.weight"];
  EXPECT_EQ(now.unsafeGetTensorImpl(), impl);
  const int64_t rows = rank == 2 ? 1 : 3;
  ASSERT_EQ(now.sizes(), torch::IntArrayRef({rows, 4}));
  EXPECT_TRUE(now.requires_grad());
  torch::Tensor expected =
      torch::arange(28, torch::kFloat32).reshape({7, 4}).narrow(0, 3 * rank, rows);  // base 0
  EXPECT_TRUE(torch::equal(now, expected));
  // embed: columns [2r, 2r + 2) of 6.
  torch::Tensor embed = model.named_parameters()["embed"];
  EXPECT_TRUE(torch::equal(
      embed, (torch::arange(30, torch::kFloat32).reshape({5, 6}) + 2000).narrow(1, 2 * rank, 2)));
  // Replicated bias: the source's values everywhere. Buffer scale [4] over 3 ranks: 2, 2, 0.
  EXPECT_TRUE(torch::equal(model.named_parameters()["layers.0.fc.bias"],
                           torch::arange(7, torch::kFloat32) + 1000));
  EXPECT_EQ(model.named_buffers()["layers.0.scale"].size(0), rank == 2 ? 0 : 2);
  // The optimizer built before updates the shard, and shardkit's view (for Gather) sees it.
  for (auto& p : model.parameters()) p.mutable_grad() = torch::ones_like(p);
  sgd.step();
  EXPECT_TRUE(torch::equal(now, expected - 0.5));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st,
                                shards.module.GetSharded("layers.0.fc.weight"));
  EXPECT_EQ(st->shards()[rank].offsets, Shape({3 * rank, 0}));
  Tensor full;
  SHARDKIT_ASSERT_OK(st->Gather(0, rank == 0 ? &full : nullptr, comm));
  if (rank == 0) {
    torch::Tensor all = torch::from_blob(full.data(), {7, 4}, torch::kFloat32);
    EXPECT_TRUE(torch::equal(all, torch::arange(28, torch::kFloat32).reshape({7, 4}) - 0.5));
  }
}

// A non-source rank's full-size tensor is freed once it holds its shard.
void NonSourceMemoryIsReleased(int rank, Communicator& comm, std::string_view) {
  static bool freed = false;
  freed = false;
  torch::nn::Module module;
  auto* block = new float[64 * 8]();
  torch::Tensor w = torch::from_blob(
      block, {64, 8},
      [](void* p) {
        delete[] static_cast<float*>(p);
        freed = true;
      },
      torch::kFloat32);
  module.register_parameter("w", w);
  w = torch::Tensor();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      TorchShards shards,
      ShardTorchModule(
          module,
          MustParsePlan(absl::StrCat(R"({"rules": [{"match": "w", "spec": )", Chunk(0), "}]}")),
          comm));
  if (rank != 0) {
    EXPECT_TRUE(freed) << "rank " << rank << " still holds the full tensor";
  }
  EXPECT_EQ(module.named_parameters()["w"].size(0), rank == 2 ? 20 : 22);
}

void TiedWeightsStayTied(int rank, Communicator& comm, std::string_view) {
  std::unique_ptr<torch::nn::Module> owner =
      WithWeights({"embed", "head"}, torch::arange(12, torch::kFloat32).reshape({6, 2}));
  torch::nn::Module& module = *owner;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      TorchShards shards,
      ShardTorchModule(module,
                       MustParsePlan(absl::StrCat(R"({"rules": [{"match": "*.weight", "spec": )",
                                                  Chunk(0), "}]}")),
                       comm));
  auto params = module.named_parameters();
  EXPECT_EQ(params["embed.weight"].data_ptr(), params["head.weight"].data_ptr());
  EXPECT_EQ(params["head.weight"].size(0), 2);
}

void TiedWeightsWithDifferentSpecsFail(int rank, Communicator& comm, std::string_view) {
  std::unique_ptr<torch::nn::Module> owner = WithWeights({"embed", "head"}, torch::zeros({6, 3}));
  torch::nn::Module& module = *owner;
  const std::string plan =
      absl::StrCat(R"({"rules": [{"match": "embed.weight", "spec": )", Chunk(0), "}]}");
  absl::StatusOr<TorchShards> result = ShardTorchModule(module, MustParsePlan(plan), comm);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("\"embed.weight\""), HasSubstr("\"head.weight\"")));
  EXPECT_THAT(AllMessages(comm, result.status()), ::testing::Each(result.status().message()));
  EXPECT_EQ(module.named_parameters()["head.weight"].sizes(), torch::IntArrayRef({6, 3}));
}

void SeveralShardsOnOneRankFail(int rank, Communicator& comm, std::string_view) {
  std::unique_ptr<torch::nn::Module> owner = WithWeights({"fc"}, torch::zeros({4, 2}));
  torch::nn::Module& module = *owner;
  const std::string plan = R"({"rules": [{"match": "fc.weight", "spec": {"type": "chunk",
      "dim": 0, "placements": ["rank:0/cpu", "rank:1/cpu", "rank:1/cpu", "rank:2/cpu"]}}]})";
  absl::StatusOr<TorchShards> result = ShardTorchModule(module, MustParsePlan(plan), comm);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), AllOf(HasSubstr("\"fc.weight\""), HasSubstr("rank 1")));
  EXPECT_THAT(AllMessages(comm, result.status()), ::testing::Each(result.status().message()));
  EXPECT_EQ(module.named_parameters()["fc.weight"].sizes(), torch::IntArrayRef({4, 2}));
}

// Non-source ranks hold meta parameters: nothing full-size is allocated there. ShardTorchModule
// fills them in place: the module's member tensor, a tied name and an optimizer built before all
// see the shard (shallow_copy_from keeps the TensorImpl, requires_grad included).
void ModuleFromMetaOnOtherRanks(int rank, Communicator& comm, std::string_view) {
  const auto device = torch::device(rank == 0 ? torch::kCPU : torch::kMeta);
  torch::nn::Module module;
  torch::Tensor w = module.register_parameter("w", torch::empty({6, 4}, device));
  torch::Tensor b = module.register_parameter("b", torch::empty({4}, device));  // replicated
  module.register_parameter("tied", w);  // one tensor under two names
  const torch::Tensor full = torch::arange(24, torch::kFloat32).reshape({6, 4});
  if (rank == 0) {
    torch::NoGradGuard no_grad;
    w.copy_(full);
    b.copy_(torch::arange(4, torch::kFloat32) + 100);
  }
  // Built before sharding; over w and b once each (module.parameters() lists w twice, as "tied").
  torch::optim::SGD sgd(std::vector<torch::Tensor>{w, b}, torch::optim::SGDOptions(0.5));
  const std::string plan = absl::StrCat(R"({"rules": [{"match": "w", "spec": )", Chunk(0),
                                        R"(}, {"match": "tied", "spec": )", Chunk(0), "}]}");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TorchShards shards,
                                ShardTorchModule(module, MustParsePlan(plan), comm));
  ASSERT_FALSE(w.is_meta());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(torch::equal(w, full.narrow(0, 2 * rank, 2)));
  EXPECT_TRUE(torch::equal(b, torch::arange(4, torch::kFloat32) + 100));
  EXPECT_TRUE(module.named_parameters()["tied"].is_same(w));
  w.mutable_grad() = torch::ones_like(w);
  b.mutable_grad() = torch::zeros_like(b);
  sgd.step();  // the optimizer built on the meta tensors updates the shards
  EXPECT_TRUE(torch::equal(w, full.narrow(0, 2 * rank, 2) - 0.5));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, shards.module.GetSharded("w"));
  EXPECT_EQ(st->local_shards().front().tensor.data(), static_cast<std::byte*>(w.data_ptr()));
}

// A meta tensor on the source has no data to send: the engine's error, the same on every rank.
void MetaOnTheSourceFails(int rank, Communicator& comm, std::string_view) {
  torch::nn::Module module;
  module.register_parameter("w", torch::empty({4}, torch::device(torch::kMeta)));
  absl::StatusOr<TorchShards> result =
      ShardTorchModule(module, MustParsePlan(R"({"rules": []})"), comm);
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(AllMessages(comm, result.status()), ::testing::Each(result.status().message()));
}

// Non-source ranks pass meta tensors; H = 2 < world: rank 2's shard is empty.
void TensorsFromMeta(int rank, Communicator& comm, std::string_view) {
  const auto options = torch::dtype(torch::kFloat64).device(rank == 0 ? torch::kCPU : torch::kMeta);
  torch::Tensor small = torch::empty({2, 3}, options);
  torch::Tensor flags = torch::empty({4}, torch::dtype(torch::kBool).device(options.device()));
  if (rank == 0) {
    small.copy_(torch::arange(6, torch::kFloat64).reshape({2, 3}));
    flags.copy_(torch::tensor({true, false, false, true}));
  }
  small.set_requires_grad(true);
  const std::string plan =
      absl::StrCat(R"({"rules": [{"match": "small", "spec": )", Chunk(0), "}]}");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      TorchShards shards,
      ShardTorchTensors({{"small", small}, {"flags", flags}}, MustParsePlan(plan), comm));
  ASSERT_EQ(shards.local.size(), 2u);
  const torch::Tensor& mine = shards.local[0].second;
  EXPECT_EQ(mine.sizes(), torch::IntArrayRef({rank == 2 ? 0 : 1, 3}));
  EXPECT_TRUE(mine.requires_grad());
  if (rank < 2) {
    EXPECT_TRUE(
        torch::equal(mine.detach(), torch::arange(3, torch::kFloat64).reshape({1, 3}) + 3 * rank));
  }
  EXPECT_EQ(shards.local[1].second.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(shards.local[1].second, torch::tensor({true, false, false, true})));
  EXPECT_EQ(small.is_meta(), rank != 0);  // the input is left alone
}

// Trained shards saved at world 3 (SaveTorchShards), then loaded back: by LoadTorchShards from meta
// tensors with another layout (columns; embed replicated), and by LoadTorchModule in place with
// the saved layout. A shape that differs from the directory fails alike on every rank. Run once
// with shardkit's directory and once with a PyTorch DCP checkpoint (SaveShardsOptions::format).
void SaveThenLoad(int rank, Communicator& comm, checkpoint::OutputFormat format) {
  const std::string dir =
      testing::TestPath(format == checkpoint::OutputFormat::kDcp ? "torch-save-dcp" : "torch-save");
  {
    Model model;
    FillSource(model, rank);
    torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.5));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(TorchShards shards,
                                  ShardTorchModule(model, MustParsePlan(kModelPlan), comm));
    for (auto& p : model.parameters()) p.mutable_grad() = torch::ones_like(p);
    sgd.step();  // what is saved is the trained value
    SHARDKIT_ASSERT_OK(SaveTorchShards(dir, shards, comm, {.format = format}));
  }
  const torch::Tensor weight = torch::arange(28, torch::kFloat32).reshape({7, 4}) - 0.5;
  const torch::Tensor embed = torch::arange(30, torch::kFloat32).reshape({5, 6}) + 2000 - 0.5;
  NamedTorchTensors metas;
  for (const auto& [name, t] : NamedTensorsOf(Model())) {
    metas.emplace_back(name, torch::empty(t.sizes(), torch::device(torch::kMeta)));
  }
  const std::string columns =
      absl::StrCat(R"({"rules": [{"match": "layers.*.fc.weight", "spec": )", Chunk(1), "}]}");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TorchShards loaded,
                                LoadTorchShards(dir, metas, MustParsePlan(columns), comm));
  ASSERT_EQ(loaded.local.size(), 4u);
  auto local = [&loaded](const std::string& name) {
    for (const auto& [n, t] : loaded.local) {
      if (n == name) return t;
    }
    return torch::Tensor();
  };
  const int64_t cols = rank == 2 ? 0 : 2;
  EXPECT_TRUE(torch::equal(local("layers.0.fc.weight"), weight.narrow(1, 2 * rank, cols)));
  EXPECT_TRUE(torch::equal(local("embed"), embed));  // replicated under this plan
  EXPECT_TRUE(torch::equal(local("layers.0.fc.bias"), torch::arange(7, torch::kFloat32) + 999.5));
  EXPECT_TRUE(torch::equal(local("layers.0.scale"), torch::arange(4, torch::kFloat32) + 3000));

  Model again;  // materialised zeros on every rank, filled in place
  const auto* impl = again.layers[0]->as<Layer>()->fc->weight.unsafeGetTensorImpl();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TorchShards in_place,
                                LoadTorchModule(dir, again, MustParsePlan(kModelPlan), comm));
  torch::Tensor now = again.named_parameters()["layers.0.fc.weight"];
  EXPECT_EQ(now.unsafeGetTensorImpl(), impl);
  EXPECT_TRUE(now.requires_grad());
  EXPECT_TRUE(torch::equal(now, weight.narrow(0, 3 * rank, rank == 2 ? 1 : 3)));
  EXPECT_TRUE(torch::equal(again.named_parameters()["embed"], embed.narrow(1, 2 * rank, 2)));

  for (auto& [name, t] : metas) {
    if (name == "embed") t = torch::empty({5, 7}, torch::device(torch::kMeta));  // [5, 6] in DIR
  }
  absl::StatusOr<TorchShards> bad = LoadTorchShards(dir, metas, MustParsePlan(columns), comm);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("embed")) << bad.status();
  EXPECT_THAT(AllMessages(comm, bad.status()), ::testing::Each(bad.status().message()));
}

class ShardTorchTest : public ::testing::Test {
 protected:
  void Run(RankGroup::CaseFn fn) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(kWorld, "gloo"));
    SHARDKIT_EXPECT_OK(group->Run(fn));
  }
};

TEST_F(ShardTorchTest, ModuleShardsInPlace) { Run(&ModuleShardsInPlace); }
TEST_F(ShardTorchTest, NonSourceMemoryIsReleased) { Run(&NonSourceMemoryIsReleased); }
TEST_F(ShardTorchTest, TiedWeightsStayTied) { Run(&TiedWeightsStayTied); }
TEST_F(ShardTorchTest, TiedWeightsWithDifferentSpecsFail) {
  Run(&TiedWeightsWithDifferentSpecsFail);
}
TEST_F(ShardTorchTest, SeveralShardsOnOneRankFail) { Run(&SeveralShardsOnOneRankFail); }
TEST_F(ShardTorchTest, ModuleFromMetaOnOtherRanks) { Run(&ModuleFromMetaOnOtherRanks); }
TEST_F(ShardTorchTest, MetaOnTheSourceFails) { Run(&MetaOnTheSourceFails); }
TEST_F(ShardTorchTest, TensorsFromMeta) { Run(&TensorsFromMeta); }
TEST_F(ShardTorchTest, SaveThenLoad) {
  Run([](int rank, Communicator& comm, std::string_view) {
    SaveThenLoad(rank, comm, checkpoint::OutputFormat::kShardkit);
  });
}
TEST_F(ShardTorchTest, SaveThenLoadDcp) {
  Run([](int rank, Communicator& comm, std::string_view) {
    SaveThenLoad(rank, comm, checkpoint::OutputFormat::kDcp);
  });
}

}  // namespace
}  // namespace shardkit::libtorch
