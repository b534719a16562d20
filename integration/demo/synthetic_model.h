// The synthetic model and built-in plan of `shardkit demo`: a small transformer-shaped set of named
// float32 parameters with deterministic, rank-independent contents.
//
//   SyntheticModelConfig config;  // the demo's default: 53 parameters, about 65 MiB
//   std::vector<specs::ParameterInfo> params = SyntheticParameters(config);
//   // The source materialises the model; every other rank starts from meta tensors.
//   SHARDKIT_ASSIGN_OR_RETURN(Module module, BuildSyntheticModel(config, rank == 0));
//   SHARDKIT_ASSIGN_OR_RETURN(specs::Plan plan, specs::ParsePlan(DemoPlanJson(config, world)));
//   // Later, to verify a gathered parameter bit for bit:
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor expected, ExpectedParameter(params[i], i));
//
// Parameters, in module order: embed.weight [vocab, hidden], pos_embed.weight [positions, hidden];
// per layer L: layers.L.attn.norm.weight [hidden], layers.L.attn.qkv.weight [3·hidden, hidden],
// layers.L.attn.qkv.bias [3·hidden], layers.L.attn.out.weight [hidden, hidden],
// layers.L.mlp.norm.weight [hidden], layers.L.mlp.up.weight [4·hidden, hidden],
// layers.L.mlp.up.bias [4·hidden], layers.L.mlp.down.weight [hidden, 4·hidden];
// then norm.weight [hidden], norm.bias [hidden], head.weight [vocab, hidden].
#ifndef SHARDKIT_INTEGRATION_DEMO_SYNTHETIC_MODEL_H_
#define SHARDKIT_INTEGRATION_DEMO_SYNTHETIC_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/module.h"
#include "core/tensor/device.h"
#include "core/tensor/tensor.h"
#include "specs/plan.h"

namespace shardkit::demo {

struct SyntheticModelConfig {
  int64_t layers = 6;
  int64_t hidden = 384;
  int64_t vocab = 8192;
  int64_t positions = 512;
};

// The parameters' names and shapes, in module order (see the file comment).
std::vector<specs::ParameterInfo> SyntheticParameters(const SyntheticModelConfig& config);

// Total bytes of the model (float32).
int64_t SyntheticModelBytes(const SyntheticModelConfig& config);

// The contents of parameter `index` (its position in module order): element i is
// float32(1000 · index + i). Every value is exact while 1000 · index + numel <= 2^24 (the default
// model's largest parameter has 3.1 M elements), so no two elements of a parameter are equal and
// parameters start at different values: a shard delivered to the wrong offset or parameter is
// caught.
// Errors: as Tensor::Arange.
[[nodiscard]] absl::StatusOr<Tensor> ExpectedParameter(const specs::ParameterInfo& parameter,
                                                       size_t index);

// The model: with `materialize`, every parameter holds ExpectedParameter on `device` (made on the
// host, then copied there one parameter at a time); otherwise every parameter is a meta tensor of
// the same shape (what a rank other than the source starts from).
// Errors: as Tensor::Arange / Tensor::Meta / Tensor::Clone / Module::AddParameter.
[[nodiscard]] absl::StatusOr<Module> BuildSyntheticModel(const SyntheticModelConfig& config,
                                                         bool materialize,
                                                         const Device& device = Device::Cpu());

// The built-in plan for `world_size` ranks (source rank 0, strategy scatter), mixing every kind of
// spec: rows (dim 0) for embed, qkv and mlp.up (weights and biases); columns for attn.out (dim 1)
// and mlp.down (dim -1); head.weight as an enumerable 2×2 grid of blocks on ranks 0, 1, 2, 3
// modulo `world_size` (with fewer than four ranks, a rank holds several blocks); no rule for norms
// and pos_embed, which are therefore replicated. Requires world_size >= 1.
std::string DemoPlanJson(const SyntheticModelConfig& config, int world_size);

}  // namespace shardkit::demo

#endif  // SHARDKIT_INTEGRATION_DEMO_SYNTHETIC_MODEL_H_
