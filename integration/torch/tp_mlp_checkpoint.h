// The tensor-parallel MLP example's inputs and outputs (tp_mlp_train, tp_mlp_reference): no
// LibTorch here.
//
// IN holds F32 tensors fc1.weight [H, D], fc2.weight [O, H], x [B, D], y [B, O]; OUT holds the
// trained fc1.weight and fc2.weight (F32). Both programs take
//   --checkpoint IN.safetensors --steps N --lr LR --out OUT.safetensors
// (tp_mlp_train also --save-shards DIR).
#ifndef SHARDKIT_INTEGRATION_TORCH_TP_MLP_CHECKPOINT_H_
#define SHARDKIT_INTEGRATION_TORCH_TP_MLP_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"
#include "integration/flags/flags.h"

namespace shardkit::tp_mlp {

struct MlpDims {
  int64_t hidden = 0;  // H
  int64_t in = 0;      // D
  int64_t out = 0;     // O
  int64_t batch = 0;   // B
};

struct MlpData {
  MlpDims dims;
  Tensor fc1, fc2, x, y;
};

// Reads and validates IN. Errors: kNotFound / kInvalidArgument naming the file as
// safetensors::Reader; kInvalidArgument naming the tensor that is missing, not F32 or not 2-D, or
// the shapes that are inconsistent.
[[nodiscard]] absl::StatusOr<MlpData> ReadMlpCheckpoint(const std::string& path);

// Writes fc1.weight and fc2.weight to `path` atomically and durably (fsynced, then renamed).
[[nodiscard]] absl::Status WriteMlpWeights(const std::string& path, const Tensor& fc1,
                                           const Tensor& fc2);

struct TrainFlags {
  std::string checkpoint, out, save_shards;
  int64_t steps = 0;
  double lr = 0;
};

// Parses the command line (argv without the program name) of `command`. done() means exit now
// with exit_code() (help printed, or the error reported: exit 2).
[[nodiscard]] flags::ParseResult ParseTrainFlags(const std::string& command,
                                                 const std::vector<std::string>& args,
                                                 bool save_shards_flag, TrainFlags* flags);

}  // namespace shardkit::tp_mlp

#endif  // SHARDKIT_INTEGRATION_TORCH_TP_MLP_CHECKPOINT_H_
