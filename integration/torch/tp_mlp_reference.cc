// tp_mlp_reference --checkpoint IN.safetensors --steps N --lr LR --out OUT.safetensors
// The same training as tp_mlp_train in one process with plain LibTorch (no shardkit engine, no
// communication): what tp_mlp_train_test compares tp_mlp_train's output with.
#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "integration/flags/flags.h"
#include "integration/torch/torch_tensor.h"
#include "integration/torch/tp_mlp_checkpoint.h"

namespace shardkit::tp_mlp {
namespace {

constexpr char kCommand[] = "tp_mlp_reference";

absl::StatusOr<torch::Tensor> Load(const Tensor& t) {
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor view, libtorch::ToTorch(t));
  return view.clone();
}

absl::Status Train(const TrainFlags& flags) {
  SHARDKIT_ASSIGN_OR_RETURN(MlpData data, ReadMlpCheckpoint(flags.checkpoint));
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor w1, Load(data.fc1));
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor w2, Load(data.fc2));
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor x, Load(data.x));
  SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor y, Load(data.y));
  w1.set_requires_grad(true);
  w2.set_requires_grad(true);
  torch::optim::SGD sgd({w1, w2}, torch::optim::SGDOptions(flags.lr));
  for (int64_t k = 1; k <= flags.steps; ++k) {
    sgd.zero_grad();
    torch::Tensor out = torch::relu(x.matmul(w1.t())).matmul(w2.t());
    torch::Tensor loss = (out - y).pow(2).mean();
    loss.backward();
    sgd.step();
    std::cout << absl::StrFormat("step %d loss %.9g\n", k, loss.item<float>());
  }
  SHARDKIT_ASSIGN_OR_RETURN(Tensor fc1, libtorch::FromTorch(w1.detach()));
  SHARDKIT_ASSIGN_OR_RETURN(Tensor fc2, libtorch::FromTorch(w2.detach()));
  return WriteMlpWeights(flags.out, fc1, fc2);
}

}  // namespace
}  // namespace shardkit::tp_mlp

int main(int argc, char** argv) {
  namespace tp = shardkit::tp_mlp;
  torch::set_num_threads(1);  // as tp_mlp_train's ranks
  tp::TrainFlags flags;
  const shardkit::flags::ParseResult parsed = tp::ParseTrainFlags(
      tp::kCommand, std::vector<std::string>(argv + 1, argv + argc), false, &flags);
  if (parsed.done()) return parsed.exit_code();
  absl::Status status = tp::Train(flags);
  return status.ok() ? 0 : shardkit::flags::ReportError(tp::kCommand, status);
}
