// The tensor-parallel MLP trainer behind //integration/torch:tp_mlp_train (docs/cli.md), one rank
// of it: out = relu(x @ fc1.weight^T) @ fc2.weight^T, loss = mean((out - y)^2), plain SGD.
//
// fc1.weight is sharded by rows (chunk dim 0) and fc2.weight by columns (chunk dim 1) over every
// rank (Megatron's column- then row-parallel pair); x and y are replicated. Each rank computes its
// partial `out` from its shards; the partials are summed with the Communicator's AllGather and a
// local sum in rank order (the same bits on every rank). Backward and SGD run on the local shards
// with LibTorch's autograd: no gradient moves, because each shard's gradient depends only on the
// summed `out` and that shard. H need not divide by the world; zero-size shards work.
#ifndef SHARDKIT_INTEGRATION_TORCH_TP_MLP_H_
#define SHARDKIT_INTEGRATION_TORCH_TP_MLP_H_

#include <ostream>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "integration/torch/tp_mlp_checkpoint.h"

namespace shardkit::tp_mlp {

// Collective. Rank 0 checks flags.out (formats::CheckOutputFile: not IN nor inside
// flags.save_shards, not a link or special file, a safetensors file if it exists), reads and
// validates flags.checkpoint and shares the verdicts (a bad OUT or IN is the same kInvalidArgument
// on every rank), then every rank trains for flags.steps; rank 0 prints "step K loss L" (%.9g) on
// `out` before each update, gathers the weights and writes flags.out.
// Errors: formats::CheckOutputFile's and the reader's (kInvalidArgument / kNotFound), and the
// engine's.
[[nodiscard]] absl::Status TrainTensorParallel(const TrainFlags& flags, Communicator& comm,
                                               std::ostream& out);

}  // namespace shardkit::tp_mlp

#endif  // SHARDKIT_INTEGRATION_TORCH_TP_MLP_H_
