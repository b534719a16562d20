#include "integration/torch/tp_mlp.h"

#include <torch/torch.h>

#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/module.h"
#include "integration/checkpoint/save_shards.h"
#include "integration/formats/output_file/output_file.h"
#include "integration/torch/shard_torch.h"
#include "integration/torch/torch_tensor.h"
#include "specs/plan.h"

namespace shardkit::tp_mlp {
namespace {

constexpr int kSource = 0;

constexpr char kPlan[] = R"({"version": 1, "src_rank": 0, "strategy": "scatter", "rules": [
  {"match": "fc1.weight",
   "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all", "device": "cpu"}}},
  {"match": "fc2.weight",
   "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all", "device": "cpu"}}}]})";

// fc1, fc2 (no bias) and the replicated batch as buffers x, y.
struct Mlp : torch::nn::Module {
  explicit Mlp(const MlpDims& d)
      : fc1(register_module(
            "fc1", torch::nn::Linear(torch::nn::LinearOptions(d.in, d.hidden).bias(false)))),
        fc2(register_module(
            "fc2", torch::nn::Linear(torch::nn::LinearOptions(d.hidden, d.out).bias(false)))),
        x(register_buffer("x", torch::zeros({d.batch, d.in}))),
        y(register_buffer("y", torch::zeros({d.batch, d.out}))) {}

  torch::nn::Linear fc1, fc2;
  torch::Tensor x, y;
};

// Rank 0, which writes OUT, checks that it may (formats::CheckOutputFile: not IN, not inside the
// --save-shards directory, not a link or special file, a safetensors file if it exists); every
// rank learns the verdict before training.
absl::Status CheckOut(const TrainFlags& flags, Communicator& comm) {
  formats::OutputRules rules{
      .keep_out_of = {{flags.checkpoint, "the checkpoint it would be read from"}}};
  if (!flags.save_shards.empty()) {
    rules.keep_out_of.push_back({flags.save_shards, "the --save-shards directory"});
  }
  const absl::Status mine =
      comm.rank() == kSource ? formats::CheckOutputFile(flags.out, rules) : absl::OkStatus();
  return AgreeOnStatus(comm, mine, "--out");
}

// Rank 0 validates IN; every rank learns the verdict and the dimensions.
absl::StatusOr<MlpData> LoadOnSource(const std::string& path, Communicator& comm) {
  absl::StatusOr<MlpData> data = MlpData{};
  if (comm.rank() == kSource) data = ReadMlpCheckpoint(path);
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, data.status(), "checkpoint"));
  std::array<int64_t, 4> dims = {data->dims.hidden, data->dims.in, data->dims.out,
                                 data->dims.batch};
  SHARDKIT_RETURN_IF_ERROR(comm.Broadcast(MutableBuffer(dims.data(), sizeof(dims)), kSource));
  data->dims = {.hidden = dims[0], .in = dims[1], .out = dims[2], .batch = dims[3]};
  return data;
}

absl::Status CopyInto(torch::Tensor& dst, const Tensor& src) {
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor view, libtorch::ToTorch(src));
  torch::NoGradGuard no_grad;
  dst.copy_(view);
  return absl::OkStatus();
}

absl::Status FillFromSource(Mlp& model, const MlpData& data) {
  SHARDKIT_RETURN_IF_ERROR(CopyInto(model.fc1->weight, data.fc1));
  SHARDKIT_RETURN_IF_ERROR(CopyInto(model.fc2->weight, data.fc2));
  SHARDKIT_RETURN_IF_ERROR(CopyInto(model.x, data.x));
  return CopyInto(model.y, data.y);
}

// The sum of every rank's `partial`, added in rank order on every rank.
absl::StatusOr<torch::Tensor> SumOverRanks(const torch::Tensor& partial, Communicator& comm) {
  const torch::Tensor mine = partial.detach().contiguous();
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      comm.AllGather(ConstBuffer(mine.data_ptr(), mine.numel() * sizeof(float))));
  torch::Tensor total = torch::zeros_like(mine);
  for (std::string& bytes : all) {
    if (bytes.size() != mine.numel() * sizeof(float)) {
      return absl::InternalError(absl::StrCat("partial output of ", bytes.size(), " bytes"));
    }
    total += torch::from_blob(bytes.data(), mine.sizes(), torch::kFloat32);
  }
  return total;
}

// One SGD step; returns the loss before it.
absl::StatusOr<float> Step(Mlp& model, torch::optim::SGD& sgd, Communicator& comm) {
  sgd.zero_grad();
  torch::Tensor partial = model.fc2(torch::relu(model.fc1(model.x)));
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor total, SumOverRanks(partial, comm));
  // The value is exactly `total`; the gradient reaches this rank's shards through `partial`.
  torch::Tensor out = total + (partial - partial.detach());
  torch::Tensor loss = (out - model.y).pow(2).mean();
  loss.backward();
  sgd.step();
  return loss.item<float>();
}

// --save-shards: the two parameters' shards (not the inputs x and y), saved without gathering.
absl::Status SaveTrainedShards(const std::string& dir, const Module& shards, Communicator& comm) {
  Module weights;
  for (const char* name : {"fc1.weight", "fc2.weight"}) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, shards.GetSharded(name));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(st->global_shape(), st->dtype()));
    SHARDKIT_RETURN_IF_ERROR(weights.AddParameter(name, std::move(meta)));
    SHARDKIT_RETURN_IF_ERROR(weights.SetSharded(name, *st));
  }
  return Annotate(checkpoint::SaveShards(dir, weights, comm), absl::StrCat("--save-shards ", dir));
}

absl::Status GatherAndWrite(const Module& shards, const std::string& path, Communicator& comm) {
  const bool source = comm.rank() == kSource;
  Tensor fc1, fc2;
  SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* w1, shards.GetSharded("fc1.weight"));
  SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* w2, shards.GetSharded("fc2.weight"));
  SHARDKIT_RETURN_IF_ERROR(w1->Gather(kSource, source ? &fc1 : nullptr, comm));
  SHARDKIT_RETURN_IF_ERROR(w2->Gather(kSource, source ? &fc2 : nullptr, comm));
  absl::Status written = source ? WriteMlpWeights(path, fc1, fc2) : absl::OkStatus();
  return AgreeOnStatus(comm, written, "writing --out");
}

}  // namespace

absl::Status TrainTensorParallel(const TrainFlags& flags, Communicator& comm, std::ostream& out) {
  torch::set_num_threads(1);  // the ranks share the machine's cores: one intra-op thread each
  SHARDKIT_RETURN_IF_ERROR(CheckOut(flags, comm));
  SHARDKIT_ASSIGN_OR_RETURN(MlpData data, LoadOnSource(flags.checkpoint, comm));
  Mlp model(data.dims);
  if (comm.rank() == kSource) SHARDKIT_RETURN_IF_ERROR(FillFromSource(model, data));
  data = MlpData{};  // the source's copy of IN is no longer needed
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(flags.lr));
  SHARDKIT_ASSIGN_OR_RETURN(specs::Plan plan, specs::ParsePlan(kPlan));
  SHARDKIT_ASSIGN_OR_RETURN(libtorch::TorchShards shards,
                            libtorch::ShardTorchModule(model, plan, comm));
  for (int64_t k = 1; k <= flags.steps; ++k) {
    SHARDKIT_ASSIGN_OR_RETURN(float loss, Step(model, sgd, comm));
    if (comm.rank() == kSource)
      out << absl::StrFormat("step %d loss %.9g\n", k, loss) << std::flush;
  }
  SHARDKIT_RETURN_IF_ERROR(GatherAndWrite(shards.module, flags.out, comm));
  if (!flags.save_shards.empty()) {
    return SaveTrainedShards(flags.save_shards, shards.module, comm);
  }
  return absl::OkStatus();
}

}  // namespace shardkit::tp_mlp
