#include "integration/torch/shard_torch.h"

#include <functional>
#include <map>
#include <optional>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "integration/torch/torch_tensor.h"
#include "specs/layout.h"
#include "specs/spec_json.h"

namespace shardkit::libtorch {
namespace {

// The canonical JSON of the spec `plan` gives `name`, or "replicated".
std::string SpecOf(const specs::Plan& plan, std::string_view name) {
  std::optional<size_t> rule = specs::MatchRule(plan, name);
  return rule ? specs::CanonicalJson(plan.rules[*rule].spec) : std::string("replicated");
}

absl::Status CheckTensor(const std::string& name, const torch::Tensor& t) {
  if (!t.defined()) return absl::InvalidArgumentError(absl::StrCat(name, ": undefined tensor"));
  if (!t.is_meta() && !t.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not contiguous (the engine shards contiguous tensors)"));
  }
  return FromTorchDtype(t.scalar_type()).status();
}

// Tensors over the same memory must be the same view with the same spec. Returns, for each tied
// tensor, the index of the first tensor it is tied to.
absl::StatusOr<std::map<size_t, size_t>> FindTies(const NamedTorchTensors& tensors,
                                                  const specs::Plan& plan) {
  std::map<size_t, size_t> ties;
  absl::flat_hash_map<const void*, size_t> by_storage;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = tensors[i].second;
    if (!t.is_meta() && t.numel() == 0) continue;
    // A meta tensor has no storage: tied meta parameters are one TensorImpl (LibTorch ties by
    // registering one tensor under two names).
    const void* memory = t.is_meta() ? static_cast<const void*>(t.unsafeGetTensorImpl())
                                     : static_cast<const void*>(t.storage().unsafeGetStorageImpl());
    auto [it, first] = by_storage.try_emplace(memory, i);
    if (first) continue;
    const auto& [name0, t0] = tensors[it->second];
    const auto& name = tensors[i].first;
    if (!t0.is_same(t) && (t0.data_ptr() != t.data_ptr() || t0.sizes() != t.sizes() ||
                           t0.strides() != t.strides() || t0.dtype() != t.dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", name0, "\" and \"", name, "\" share storage but are different views"));
    }
    if (SpecOf(plan, name0) != SpecOf(plan, name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tied parameters \"", name0, "\" and \"", name,
                       "\" share storage but get different specs: ", SpecOf(plan, name0), " and ",
                       SpecOf(plan, name)));
    }
    ties[i] = it->second;
  }
  return ties;
}

// A torch parameter is one tensor: no rank may hold two or more shards of it. Decided from the
// plan's layout of the shapes (the same on every rank whose shapes agree; the engine's agreement
// catches those that do not). A plan that does not resolve is left to the engine to report.
absl::Status CheckOneShardPerRank(const NamedTorchTensors& tensors, const specs::Plan& plan,
                                  int world_size) {
  std::vector<specs::ParameterInfo> infos;
  for (const auto& [name, t] : tensors) infos.push_back({name, FromTorchSizes(t.sizes())});
  specs::Plan unchecked = plan;
  unchecked.src_rank = 0;  // src_rank is the engine's to check
  absl::StatusOr<std::vector<specs::ResolvedParameter>> resolved =
      specs::Resolve(unchecked, infos, world_size);
  if (!resolved.ok()) return absl::OkStatus();
  for (const specs::ResolvedParameter& p : *resolved) {
    if (!p.rule) continue;
    std::map<int64_t, int> count;
    for (const specs::ShardMetadata& shard : p.layout.shards) {
      if (++count[shard.placement.rank()] == 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter \"", p.name, "\": rank ", shard.placement.rank(),
            " would hold two or more of its shards, which one torch::Tensor cannot be"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<size_t, size_t>> LocalChecks(const NamedTorchTensors& tensors,
                                                     const specs::Plan& plan, int world_size) {
  for (const auto& [name, t] : tensors) SHARDKIT_RETURN_IF_ERROR(CheckTensor(name, t));
  SHARDKIT_RETURN_IF_ERROR(CheckOneShardPerRank(tensors, plan, world_size));
  return FindTies(tensors, plan);
}

absl::StatusOr<Module> ViewsOf(const NamedTorchTensors& tensors) {
  Module module;
  for (const auto& [name, t] : tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor view, FromTorch(t));
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(name, std::move(view)));
  }
  return module;
}

// This rank's tensor of `name` after the commit: its one shard, an empty tensor on `empty_device`
// when it holds none, or the replicated tensor (plain tensors: autograd flags are the caller's
// business).
absl::StatusOr<torch::Tensor> LocalTensor(const Module& module, const std::string& name,
                                          const Device& empty_device) {
  SHARDKIT_ASSIGN_OR_RETURN(bool sharded, module.IsSharded(name));
  const Tensor* tensor = nullptr;
  if (sharded) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, module.GetSharded(name));
    if (st->local_shards().empty()) {
      SHARDKIT_ASSIGN_OR_RETURN(torch::Dtype dtype, ToTorchDtype(st->dtype()));
      return torch::empty({0}, torch::dtype(dtype).device(ToTorchDevice(empty_device)));
    }
    tensor = &st->local_shards().front().tensor;
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(tensor, module.GetTensor(name));
  }
  Tensor plain = *tensor;
  plain.set_requires_grad(false);
  return ToTorch(plain);
}

// Tied tensors share the first one's slot in shardkit's view too.
absl::Status TieSlots(Module& module, const NamedTorchTensors& tensors,
                      const std::map<size_t, size_t>& ties) {
  for (const auto& [tied, first] : ties) {
    const std::string& from = tensors[first].first;
    const std::string& to = tensors[tied].first;
    SHARDKIT_ASSIGN_OR_RETURN(bool sharded, module.IsSharded(from));
    if (sharded) {
      SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, module.GetSharded(from));
      SHARDKIT_RETURN_IF_ERROR(module.SetSharded(to, *st));
    } else {
      SHARDKIT_ASSIGN_OR_RETURN(const Tensor* t, module.GetTensor(from));
      SHARDKIT_RETURN_IF_ERROR(module.SetTensor(to, *t));
    }
  }
  return absl::OkStatus();
}

// Meta tensors of the tensors' shapes, dtypes and requires_grad (what LoadShards fills).
absl::StatusOr<Module> MetaOf(const NamedTorchTensors& tensors) {
  Module module;
  for (const auto& [name, t] : tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(DType dtype, FromTorchDtype(t.scalar_type()));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(FromTorchSizes(t.sizes()), dtype));
    meta.set_requires_grad(t.requires_grad());
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(name, std::move(meta)));
  }
  return module;
}

// Builds shardkit's module for `tensors` and distributes it (ShardModule or LoadShards).
using Distribute = std::function<absl::StatusOr<Module>(const NamedTorchTensors&, absl::Time)>;

// The common path: checks, one AgreeOnStatus, `distribute`, then this rank's tensors (tied ones
// sharing the first one's). `context` names the step in errors.
absl::StatusOr<TorchShards> DistributeNamed(const NamedTorchTensors& tensors,
                                            const specs::Plan& plan, Communicator& comm,
                                            CallOptions call, std::string_view context,
                                            const Distribute& distribute) {
  call.deadline = comm.Deadline(call);  // one deadline for both steps
  absl::StatusOr<std::map<size_t, size_t>> ties = LocalChecks(tensors, plan, comm.world_size());
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, ties.status(), context, call));
  TorchShards out;
  SHARDKIT_ASSIGN_OR_RETURN(out.module, distribute(tensors, call.deadline));
  SHARDKIT_RETURN_IF_ERROR(TieSlots(out.module, tensors, *ties));
  for (const auto& [name, t] : tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor local,
                              LocalTensor(out.module, name, comm.DefaultDevice()));
    out.local.emplace_back(name, std::move(local));
  }
  return out;
}

absl::StatusOr<TorchShards> ShardNamed(const NamedTorchTensors& tensors, const specs::Plan& plan,
                                       Communicator& comm, const TorchShardOptions& options) {
  return DistributeNamed(
      tensors, plan, comm, options.shard.call, "ShardTorch",
      [&](const NamedTorchTensors& named, absl::Time deadline) -> absl::StatusOr<Module> {
        ShardOptions shard = options.shard;
        shard.call.deadline = deadline;
        SHARDKIT_ASSIGN_OR_RETURN(Module module, ViewsOf(named));
        SHARDKIT_RETURN_IF_ERROR(ShardModule(module, plan, comm, options.overrides, shard));
        return module;
      });
}

absl::StatusOr<TorchShards> LoadNamed(const std::string& dir, const NamedTorchTensors& tensors,
                                      const specs::Plan& plan, Communicator& comm,
                                      const checkpoint::LoadShardsOptions& options) {
  return DistributeNamed(
      tensors, plan, comm, options.call, "LoadTorchShards",
      [&](const NamedTorchTensors& named, absl::Time deadline) -> absl::StatusOr<Module> {
        checkpoint::LoadShardsOptions load = options;
        load.call.deadline = deadline;
        SHARDKIT_ASSIGN_OR_RETURN(Module module, MetaOf(named));
        SHARDKIT_RETURN_IF_ERROR(checkpoint::LoadShards(dir, module, plan, comm, load));
        return module;
      });
}

// Makes each of `tensors` its counterpart in `out.local` in place, so that the module's own
// torch::Tensor objects (its members, and optimizers holding them) now hold this rank's data.
// A materialised tensor takes it through set_data. A meta one (a rank that never allocated the
// full tensor) cannot: LibTorch refuses set_data from meta ("incompatible tensor type", still in
// 2.15). It takes the same step set_data takes after that check, TensorImpl::shallow_copy_from:
// storage, sizes, strides, dtype and device become the shard's; the TensorImpl (its identity, its
// autograd metadata: requires_grad, and its version counter) stays.
void SetDataInPlace(NamedTorchTensors& tensors, TorchShards& out) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    torch::Tensor& param = tensors[i].second;  // shares its TensorImpl with the module's
    const torch::Tensor& local = out.local[i].second;
    if (param.is_meta()) {
      param.unsafeGetTensorImpl()->shallow_copy_from(local.getIntrusivePtr());
    } else if (param.data_ptr() != local.data_ptr()) {
      param.set_data(local);
    }
    out.local[i].second = param;
  }
}

// requires_grad of floating-point inputs carried to the new local tensors.
void KeepRequiresGrad(const NamedTorchTensors& tensors, TorchShards& out) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    torch::Tensor& local = out.local[i].second;
    if (tensors[i].second.requires_grad() && local.is_floating_point()) {
      local.set_requires_grad(true);
    }
  }
}

// This rank's view of `t` under `plan` bound over a group: zero-filled shards on their
// placements' devices (else `device`), or, when no rule matches, `t` itself if it holds data,
// else zeros of its shape.
absl::Status AllocateView(Module& module, const std::string& name, const torch::Tensor& t,
                          const specs::Plan& plan, int group_size, int group_rank,
                          const Device& device) {
  SHARDKIT_ASSIGN_OR_RETURN(DType dtype, FromTorchDtype(t.scalar_type()));
  const Shape shape = FromTorchSizes(t.sizes());
  std::optional<size_t> rule = specs::MatchRule(plan, name);
  if (!rule) {
    absl::StatusOr<Tensor> whole = t.is_meta() ? Tensor::Zeros(shape, dtype, device) : FromTorch(t);
    if (!whole.ok()) return whole.status();
    return module.AddParameter(name, *std::move(whole));
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      ShardedTensor st,
      ShardedTensor::Zeros(shape, dtype, plan.rules[*rule].spec, group_size, group_rank, device));
  SHARDKIT_RETURN_IF_ERROR(module.AddParameter(name, Tensor()));
  return module.SetSharded(name, std::move(st));
}

}  // namespace

NamedTorchTensors NamedTensorsOf(const torch::nn::Module& module) {
  NamedTorchTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

absl::StatusOr<TorchShards> ShardTorchModule(torch::nn::Module& module, const specs::Plan& plan,
                                             Communicator& comm, const TorchShardOptions& options) {
  NamedTorchTensors tensors = NamedTensorsOf(module);
  SHARDKIT_ASSIGN_OR_RETURN(TorchShards out, ShardNamed(tensors, plan, comm, options));
  SetDataInPlace(tensors, out);
  return out;
}

absl::StatusOr<TorchShards> ShardTorchTensors(const NamedTorchTensors& tensors,
                                              const specs::Plan& plan, Communicator& comm,
                                              const TorchShardOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(TorchShards out, ShardNamed(tensors, plan, comm, options));
  KeepRequiresGrad(tensors, out);
  return out;
}

absl::Status SaveTorchShards(const std::string& dir, const TorchShards& shards, Communicator& comm,
                             const checkpoint::SaveShardsOptions& options) {
  return checkpoint::SaveShards(dir, shards.module, comm, options);
}

absl::StatusOr<TorchShards> LoadTorchShards(const std::string& dir,
                                            const NamedTorchTensors& tensors,
                                            const specs::Plan& plan, Communicator& comm,
                                            const checkpoint::LoadShardsOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(TorchShards out, LoadNamed(dir, tensors, plan, comm, options));
  KeepRequiresGrad(tensors, out);
  return out;
}

absl::StatusOr<TorchShards> LoadTorchModule(const std::string& dir, torch::nn::Module& module,
                                            const specs::Plan& plan, Communicator& comm,
                                            const checkpoint::LoadShardsOptions& options) {
  NamedTorchTensors tensors = NamedTensorsOf(module);
  SHARDKIT_ASSIGN_OR_RETURN(TorchShards out, LoadNamed(dir, tensors, plan, comm, options));
  SetDataInPlace(tensors, out);
  return out;
}

}  // namespace shardkit::libtorch

namespace shardkit::libtorch {

absl::StatusOr<TorchShards> AllocateTorchModule(torch::nn::Module& module, const specs::Plan& plan,
                                                int group_size, int group_rank,
                                                const Device& device) {
  NamedTorchTensors tensors = NamedTensorsOf(module);
  SHARDKIT_ASSIGN_OR_RETURN(auto ties, LocalChecks(tensors, plan, group_size));
  TorchShards out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    SHARDKIT_RETURN_IF_ERROR(
        ties.contains(i)  // a placeholder: TieSlots gives it the first tensor's slot
            ? out.module.AddParameter(name, Tensor())
            : AllocateView(out.module, name, t, plan, group_size, group_rank, device));
  }
  SHARDKIT_RETURN_IF_ERROR(TieSlots(out.module, tensors, ties));
  for (const auto& [name, t] : tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor local, LocalTensor(out.module, name, device));
    out.local.emplace_back(name, std::move(local));
  }
  SetDataInPlace(tensors, out);
  return out;
}

absl::StatusOr<SyncPlan> PlanSyncTorch(const TorchShards* source, const TorchShards* destination,
                                       const SyncGroups& groups, Communicator& comm,
                                       const SyncOptions& options) {
  return PlanSync(source != nullptr ? &source->module : nullptr,
                  destination != nullptr ? &destination->module : nullptr, groups, comm, options);
}

absl::Status SyncTorch(SyncPlan& plan, const TorchShards* source, TorchShards* destination,
                       Communicator& comm, const SyncCallOptions& options, SyncReport* report) {
  return Sync(plan, source != nullptr ? &source->module : nullptr,
              destination != nullptr ? &destination->module : nullptr, comm, options, report);
}

}  // namespace shardkit::libtorch
