// Sharding LibTorch parameters with shardkit's engine: ShardTorchModule and ShardTorchTensors.
//
//   // Every rank builds the same model; rank 0's holds the real weights.
//   Mlp model;  // a torch::nn::Module
//   torch::optim::SGD sgd(model->parameters(), 0.1);  // may be built before sharding
//   SHARDKIT_ASSIGN_OR_RETURN(TorchShards shards, ShardTorchModule(*model, plan, *comm));
//   // model's sharded parameters now ARE this rank's shards (same torch::Tensor objects).
//   ... train ...
//   SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* w, shards.module.GetSharded("fc1.weight"));
//   SHARDKIT_RETURN_IF_ERROR(w->Gather(0, comm->rank() == 0 ? &full : nullptr, *comm));
//
// Both are collectives built on ShardModule (core/engine/shard_parameter.h): a shardkit::Module of
// zero-copy views of the tensors (torch_tensor.h), one agreement, the transfers, one commit. The
// engine's checks and errors apply unchanged (the same on every rank, nothing changed on failure);
// before it, one AgreeOnStatus round makes this layer's own checks the same on every rank too:
//  - every tensor is a CPU or CUDA tensor (or meta, on ranks other than the source) of a dtype
//    shardkit has, contiguous; the backend must move its device (Gloo: CPU, NCCL: CUDA; the
//    engine's check);
//  - no rank holds two or more shards of one parameter under the plan (a torch parameter is one
//    tensor): kInvalidArgument naming the parameter and the rank — decided from the plan's layout,
//    the same on every rank;
//  - tensors sharing storage (tied weights) are the same view and match the same spec:
//    kInvalidArgument naming both otherwise (ShardTorchModule keeps them tied: both parameters get
//    the same shard tensor).
//
// Which to use:
//  - ShardTorchModule(module, …): the module's parameters and buffers (named_parameters()/
//    named_buffers(), recursively: "layers.0.attn.qkv.weight") have the right shapes and dtypes on
//    every rank; the source's hold the data, the other ranks' may be meta tensors (then nothing
//    full-size is ever allocated there). Afterwards each sharded parameter or buffer is its local
//    shard in place: the same torch::Tensor object (TensorImpl), so the module's members,
//    optimizers and references built before still work, requires_grad kept. A materialised
//    tensor takes the shard through set_data (its full-size memory is released); a meta one, which
//    set_data refuses, through TensorImpl::shallow_copy_from, the step set_data itself ends with.
//    A rank without a shard of a parameter gets an empty tensor (shape [0], on the backend's
//    default device). Replicated tensors get the source's values. Tied meta parameters are one
//    tensor registered under two names.
//  - CUDA (with the NCCL plugin, LibTorch's CUDA part linked: torch_tensor.h): the source's
//    parameters on its cuda:N, placements naming devices ("rank:1/cuda:1", or "device": "cuda"
//    for each rank's own); the shards are allocated by the plugin's allocator on their placement's
//    device and become the parameters, zero-copy, as on the CPU. The stream rule of
//    torch_tensor.h applies: the call starts after work on LibTorch's default stream and returns
//    when the shards are in place.
//  - ShardTorchTensors(named tensors, …): the same checks, but the inputs are left alone: returns
//    this rank's tensors as new torch::Tensors (by name, in input order; requires_grad as the
//    input's); the caller wires them into its model.
// Both return `TorchShards::module`: shardkit's view — a ShardedTensor per sharded name (global
// shape, the bound spec, every shard's offsets and sizes, this rank's shard sharing memory with
// the torch tensor, so a later ShardedTensor::Gather sees in-place updates such as an optimizer
// step) and a Tensor per replicated one. Keep it for gathers or SaveShards.
#ifndef SHARDKIT_INTEGRATION_TORCH_SHARD_TORCH_H_
#define SHARDKIT_INTEGRATION_TORCH_SHARD_TORCH_H_

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "core/engine/sync.h"
#include "integration/checkpoint/save_shards.h"
#include "specs/plan.h"

namespace shardkit::libtorch {

using NamedTorchTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct TorchShardOptions {
  PlanOverrides overrides;  // src_rank / strategy beyond the plan's
  ShardOptions shard;       // the deadline (for the whole call) and stats; src_rank/strategy unused
};

struct TorchShards {
  Module module;            // shardkit's view of every tensor, by name, in input order
  NamedTorchTensors local;  // this rank's tensors, same order (ShardTorchModule: the module's own)
};

// Collective. Errors: kInvalidArgument (the same on every rank) as described above and as
// ShardModule's; transport errors as ShardModule's. On failure the module is unchanged.
[[nodiscard]] absl::StatusOr<TorchShards> ShardTorchModule(torch::nn::Module& module,
                                                           const specs::Plan& plan,
                                                           Communicator& comm,
                                                           const TorchShardOptions& options = {});

// Collective. Errors: as ShardTorchModule. The input tensors are never changed.
[[nodiscard]] absl::StatusOr<TorchShards> ShardTorchTensors(const NamedTorchTensors& tensors,
                                                            const specs::Plan& plan,
                                                            Communicator& comm,
                                                            const TorchShardOptions& options = {});

// Saving and loading shard directories (integration/checkpoint/save_shards.h) from a LibTorch
// program, without gathering:
//  - SaveTorchShards(dir, shards, …): SaveShards of `shards.module` — the tensors' current values,
//    since it shares their memory (after training, the trained shards).
//  - LoadTorchShards(dir, named tensors, plan, …): every rank passes tensors (meta is fine) of the
//    global shapes and dtypes; DIR is laid out by `plan` over this communicator's world (which may
//    differ from DIR's layout and world size) and each rank reads only its shards. Returns them as
//    new tensors, like ShardTorchTensors (the same one-shard-per-rank and tied-weight rules).
//  - LoadTorchModule(dir, module, plan, …): the same into a module's parameters and buffers in
//    place (materialised or meta, on every rank), like ShardTorchModule.
// Collectives. Errors: as SaveShards / LoadShards and as ShardTorchTensors' checks (the same on
// every rank); on failure nothing is changed.
[[nodiscard]] absl::Status SaveTorchShards(const std::string& dir, const TorchShards& shards,
                                           Communicator& comm,
                                           const checkpoint::SaveShardsOptions& options = {});
[[nodiscard]] absl::StatusOr<TorchShards> LoadTorchShards(
    const std::string& dir, const NamedTorchTensors& tensors, const specs::Plan& plan,
    Communicator& comm, const checkpoint::LoadShardsOptions& options = {});
[[nodiscard]] absl::StatusOr<TorchShards> LoadTorchModule(
    const std::string& dir, torch::nn::Module& module, const specs::Plan& plan, Communicator& comm,
    const checkpoint::LoadShardsOptions& options = {});

// A module's parameters as this rank's shards of `plan` bound over a group of `group_size` ranks
// (this rank is group rank `group_rank`), zero-filled, without communication: what a weight-sync
// destination (an inference server's model, meta or materialised) starts from. Parameters no rule
// matches keep their data (meta ones become zeros). The shards live on their placements' devices,
// else on `device`; each parameter becomes its shard in place, as in ShardTorchModule (the same
// one-shard-per-rank and tied-weight rules). Errors: kInvalidArgument naming the parameter; as
// Tensor::Zeros.
[[nodiscard]] absl::StatusOr<TorchShards> AllocateTorchModule(torch::nn::Module& module,
                                                              const specs::Plan& plan,
                                                              int group_size, int group_rank,
                                                              const Device& device = Device::Cpu());

// Weight sync (core/engine/sync.h) between LibTorch models: `source` on the source group's
// ranks (e.g. a trainer's ShardTorchModule result), `destination` on the destination group's
// (e.g. a server's AllocateTorchModule result), nullptr elsewhere. Their `module` views share
// memory with the models' parameters, so a SyncTorch call updates the destination model's
// parameters in place (CPU tensors over Gloo or MPI, CUDA tensors over the NCCL plugin; the
// stream rule of torch_tensor.h). Collectives, as PlanSync and Sync.
[[nodiscard]] absl::StatusOr<SyncPlan> PlanSyncTorch(const TorchShards* source,
                                                     const TorchShards* destination,
                                                     const SyncGroups& groups, Communicator& comm,
                                                     const SyncOptions& options = {});
[[nodiscard]] absl::Status SyncTorch(SyncPlan& plan, const TorchShards* source,
                                     TorchShards* destination, Communicator& comm,
                                     const SyncCallOptions& options = {},
                                     SyncReport* report = nullptr);

// The module's parameters, then its buffers, by dotted name (recursively).
NamedTorchTensors NamedTensorsOf(const torch::nn::Module& module);

}  // namespace shardkit::libtorch

#endif  // SHARDKIT_INTEGRATION_TORCH_SHARD_TORCH_H_
