// shard_torch_bench [--mib M] [--params P] [--repeats K]: ShardTorchModule of an M-MiB module of P
// parameters (layers.K.weight, float32, rows of 256) against ShardModule of the same parameters as
// shardkit tensors, both from rank 0 with every rank starting from materialised (untouched)
// tensors. Run as ranks: `shardkit launch --nproc 4 --
// bazel-bin/integration/torch/shard_torch_bench`. Rounds alternate the two; each rank prints one
// JSON line per mode:
//   {"rank":R,"world":W,"mode":"torch"|"engine","median_s":…,"min_s":…,"peak_rss_mib":…,
//    "growth_mib":…}
// (peak: the highest VmHWM over the rounds, reset before each call once its inputs exist; growth:
// the most one call added to the resident memory it started with).
#include <torch/torch.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "core/engine/shard_parameter.h"
#include "core/os/proc_status.h"
#include "integration/flags/flags.h"
#include "integration/torch/shard_torch.h"
#include "integration/torch/torch_tensor.h"

namespace shardkit::libtorch {
namespace {

constexpr int64_t kCols = 256;

struct BenchFlags {
  int64_t mib = 1024, params = 200, repeats = 3;
};

struct Mode {
  std::string name;
  std::vector<double> seconds;
  int64_t peak = 0;    // the highest VmHWM at the end of a call
  int64_t growth = 0;  // the highest VmHWM - VmRSS before the call (what the call added)
};

int64_t Rows(const BenchFlags& f) { return (f.mib << 20) / f.params / kCols / 4; }

std::unique_ptr<torch::nn::Module> TorchModel(const BenchFlags& f, int rank) {
  auto model = std::make_unique<torch::nn::Module>();
  auto layers = model->register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t k = 0; k < f.params; ++k) {
    auto layer = layers->register_module(absl::StrCat(k), std::make_shared<torch::nn::Module>());
    torch::Tensor w = torch::empty({Rows(f), kCols});
    if (rank == 0) w.fill_(static_cast<float>(k));
    layer->register_parameter("weight", w);
  }
  return model;
}

absl::StatusOr<Module> EngineModel(const BenchFlags& f, int rank) {
  Module module;
  for (int64_t k = 0; k < f.params; ++k) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty({Rows(f), kCols}, DType::kFloat32));
    if (rank == 0) {
      SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor view, ToTorch(t));
      view.fill_(static_cast<float>(k));
    }
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(absl::StrCat("layers.", k, ".weight"), t));
  }
  return module;
}

// One timed call: ShardTorchModule (`torch_mode`) or ShardModule; the inputs are built untimed.
absl::Status Round(const BenchFlags& f, const specs::Plan& plan, Communicator& comm, Mode& mode,
                   bool torch_mode) {
  std::unique_ptr<torch::nn::Module> model;
  Module module;
  if (torch_mode) {
    model = TorchModel(f, comm.rank());
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(module, EngineModel(f, comm.rank()));
  }
  SHARDKIT_RETURN_IF_ERROR(os::ResetPeakRss());
  SHARDKIT_ASSIGN_OR_RETURN(int64_t baseline, os::ProcStatusBytes("VmRSS"));
  SHARDKIT_RETURN_IF_ERROR(comm.Barrier());
  const absl::Time start = absl::Now();
  if (torch_mode) {
    SHARDKIT_RETURN_IF_ERROR(ShardTorchModule(*model, plan, comm).status());
  } else {
    SHARDKIT_RETURN_IF_ERROR(ShardModule(module, plan, comm));
  }
  mode.seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  SHARDKIT_ASSIGN_OR_RETURN(int64_t peak, os::ProcStatusBytes("VmHWM"));
  mode.peak = std::max(mode.peak, peak);
  mode.growth = std::max(mode.growth, peak - baseline);
  return absl::OkStatus();
}

void Print(const Mode& mode, const Communicator& comm) {
  std::vector<double> s = mode.seconds;
  std::sort(s.begin(), s.end());
  std::cout << absl::StrFormat(R"({"rank":%d,"world":%d,"mode":"%s","median_s":%.4f,"min_s":%.4f,)"
                               R"("peak_rss_mib":%d,"growth_mib":%d})",
                               comm.rank(), comm.world_size(), mode.name, s[s.size() / 2],
                               s.front(), mode.peak >> 20, mode.growth >> 20)
            << std::endl;
}

absl::Status Run(const BenchFlags& f) {
  torch::set_num_threads(1);
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, ConnectFromEnv());
  SHARDKIT_ASSIGN_OR_RETURN(
      specs::Plan plan,
      specs::ParsePlan(R"({"rules": [{"match": "layers.*.weight", "spec": {"type": "chunk",
          "dim": 0, "placements": {"ranks": "all", "device": "cpu"}}}]})"));
  Mode modes[2] = {{.name = "torch"}, {.name = "engine"}};
  for (int64_t r = 0; r < f.repeats; ++r) {
    for (int m = 0; m < 2; ++m) {
      const int which = (r % 2 == 0) ? m : 1 - m;  // alternate which goes first
      SHARDKIT_RETURN_IF_ERROR(Round(f, plan, *comm, modes[which], which == 0));
    }
  }
  for (const Mode& mode : modes) Print(mode, *comm);
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardkit::libtorch

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  shardkit::libtorch::BenchFlags f;
  shardkit::flags::FlagParser parser("shard_torch_bench", "[--mib M] [--params P] [--repeats K]");
  parser.AddInt("mib", &f.mib, "total MiB (default 1024)", 1, 1 << 20);
  parser.AddInt("params", &f.params, "number of parameters (default 200)", 1, 1 << 20);
  parser.AddInt("repeats", &f.repeats, "rounds of each (default 3)", 1, 1000);
  const shardkit::flags::ParseResult parsed =
      ParseCommand(parser, std::vector<std::string>(argv + 1, argv + argc),
                   shardkit::flags::Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  absl::Status status = shardkit::libtorch::Run(f);
  return status.ok() ? 0 : shardkit::flags::ReportError("shard_torch_bench", status);
}
