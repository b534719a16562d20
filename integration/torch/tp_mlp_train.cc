// tp_mlp_train --checkpoint IN.safetensors --steps N --lr LR --out OUT.safetensors
//              [--save-shards DIR]
// One rank of the tensor-parallel MLP trainer (tp_mlp.h), run under `shardkit launch` (or any
// launcher ConnectFromEnv understands; alone, a world of one). Exit 0 on success, 2 for an
// invalid request (flags, a bad IN — the same message on every rank), 1 otherwise; the error is
// the first line on stderr.
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/connect.h"
#include "integration/flags/flags.h"
#include "integration/torch/tp_mlp.h"

namespace {

constexpr char kCommand[] = "tp_mlp_train";

int Run(const std::vector<std::string>& args) {
  shardkit::tp_mlp::TrainFlags flags;
  const shardkit::flags::ParseResult parsed =
      shardkit::tp_mlp::ParseTrainFlags(kCommand, args, /*save_shards_flag=*/true, &flags);
  if (parsed.done()) return parsed.exit_code();
  absl::StatusOr<std::unique_ptr<shardkit::Communicator>> comm = shardkit::ConnectFromEnv();
  if (!comm.ok()) return shardkit::flags::ReportError(kCommand, comm.status());
  absl::Status status = shardkit::tp_mlp::TrainTensorParallel(flags, **comm, std::cout);
  return status.ok() ? 0 : shardkit::flags::ReportError(kCommand, status);
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that died must give EPIPE, not kill this rank
  return Run(std::vector<std::string>(argv + 1, argv + argc));
}
