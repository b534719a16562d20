// Reshard: the box mover (internal/box_mover.h) with the same group of ranks on both sides. The
// descriptor agreement stands in for weight sync's agreement on layouts (both specs bound, the
// same on every rank); the one planner (internal/sync_walk.h) cuts rounds and this rank's pieces
// from the two specs' boxes; this rank's part (its new shards, the executor's staging) is
// allocated before one status round, so that a rank's failure is every rank's error before any
// byte moves; then the executor runs the rounds.
#include "core/engine/reshard.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/internal/box_mover.h"
#include "core/engine/internal/descriptor_agreement.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_walk.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"
#include "specs/fingerprint.h"
#include "specs/layout.h"
#include "specs/spec_json.h"

namespace shardkit {
namespace {

using specs::ShardMetadata;

constexpr char kName[] = "tensor";

// The plan: both layouts' boxes over every rank (from the shards already built: no spec parsed or
// bound again), walked as one parameter. Collective (the rounds' merge); its errors are every
// rank's.
// `budget`: the staging, three buckets of a third (two to send, one to receive), reused round
// after round; contiguous pieces move straight between the shards.
absl::Status Plan(const ShardedTensor& tensor, const std::vector<ShardMetadata>& new_shards,
                  int64_t budget, Communicator& comm, const CallOptions& call, absl::Time start,
                  SyncPlan& plan) {
  SHARDKIT_ASSIGN_OR_RETURN(const internal::SyncBoxes from,
                            internal::BoxesOf(tensor.shards(), comm.world_size()));
  SHARDKIT_ASSIGN_OR_RETURN(const internal::SyncBoxes to,
                            internal::BoxesOf(new_shards, comm.world_size()));
  std::vector<int> all(comm.world_size());
  for (int r = 0; r < comm.world_size(); ++r) all[r] = r;
  return internal::PlanMoves({{kName, &from, &to, tensor.dtype()}}, {all, all}, budget / 3, comm,
                             call, start, plan);
}

// This rank's side: the old tensor and the new one, each in a module of one slot (the form the
// executor reads; tensors share storage), and the executor.
struct Side {
  Module from, to;
  std::optional<ShardedTensor> result;
  internal::MoverState state;
  std::optional<internal::BoxMover> mover;
};

// Everything this rank can do before bytes move, all of which can fail on this rank alone: its
// new shards (allocated where their placements say) and the executor's staging. Errors: as
// Tensor::Empty naming the new shard, and BoxMover::Ready.
absl::Status PrepareSide(const ShardedTensor& tensor, const specs::ShardingSpec& bound,
                         const std::vector<ShardMetadata>& new_shards, const SyncPlan& plan,
                         Communicator& comm, Side& side) {
  // The executor moves a shard's contiguous pieces straight from and into its memory: the backend
  // must reach it (CUDA memory on Gloo, or host memory on NCCL, it does not).
  auto unreachable = [&comm](const Device& device) {
    return absl::InvalidArgumentError(
        absl::StrCat("is on ", device.ToString(), ", which this backend cannot move"));
  };
  for (const LocalShard& shard : tensor.local_shards()) {
    if (!comm.SupportsDevice(shard.tensor.device())) {
      return Annotate(unreachable(shard.tensor.device()), absl::StrCat("shard ", shard.index));
    }
  }
  std::vector<LocalShard> local;
  for (size_t j = 0; j < new_shards.size(); ++j) {
    if (new_shards[j].placement.rank() != comm.rank()) continue;
    const Device device = internal::PlacementDevice(new_shards[j].placement, comm);
    if (!comm.SupportsDevice(device)) {
      return Annotate(unreachable(device), absl::StrCat("new shard ", j, " (",
                                                        specs::ShardToString(new_shards[j]), ")"));
    }
    absl::StatusOr<Tensor> t = Tensor::Empty(new_shards[j].sizes, tensor.dtype(), device);
    if (!t.ok()) {
      return Annotate(t.status(), absl::StrCat("new shard ", j, " (",
                                               specs::ShardToString(new_shards[j]), ")"));
    }
    local.push_back({j, *std::move(t)});
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      side.result,
      ShardedTensor::Create(tensor.global_shape(), tensor.dtype(), tensor.requires_grad(), bound,
                            new_shards, std::move(local), comm.rank()));
  const std::pair<Module*, const ShardedTensor*> slots[] = {{&side.from, &tensor},
                                                            {&side.to, &*side.result}};
  for (auto [module, slot] : slots) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(slot->global_shape(), slot->dtype()));
    SHARDKIT_RETURN_IF_ERROR(module->AddParameter(kName, std::move(meta)));
    SHARDKIT_RETURN_IF_ERROR(module->SetSharded(kName, *slot));
  }
  side.mover.emplace(plan, side.state, &side.from, &side.to, comm, "Reshard");
  return side.mover->Ready();
}

}  // namespace

absl::StatusOr<ShardedTensor> Reshard(const ShardedTensor& tensor,
                                      const specs::ShardingSpec& new_spec, Communicator& comm,
                                      const CallOptions& options) {
  return Reshard(tensor, new_spec, comm, ReshardOptions{.call = options});
}

absl::StatusOr<ShardedTensor> Reshard(const ShardedTensor& tensor,
                                      const specs::ShardingSpec& new_spec, Communicator& comm,
                                      const ReshardOptions& options) {
  const absl::Time start = absl::Now();
  CallOptions call = options.call;
  call.deadline = comm.Deadline(options.call);
  const int64_t budget = std::max(options.memory_bytes, kMinMoverMemoryBytes);
  std::vector<std::string> errors;
  absl::StatusOr<specs::ShardingSpec> bound =
      specs::Bind(new_spec, tensor.global_shape(), comm.world_size());
  absl::StatusOr<std::vector<ShardMetadata>> new_shards =
      bound.ok() ? specs::BuildMetadata(*bound, tensor.global_shape())
                 : absl::StatusOr<std::vector<ShardMetadata>>(bound.status());
  if (!new_shards.ok()) errors.push_back(absl::StrCat("new spec: ", new_shards.status().message()));
  nlohmann::json descriptor = {{"shape", tensor.global_shape()},
                               {"dtype", DTypeName(tensor.dtype())},
                               {"from", specs::CanonicalJson(tensor.spec())},
                               {"to", specs::CanonicalJson(bound.ok() ? *bound : new_spec)},
                               {"memory_bytes", budget}};
  SHARDKIT_RETURN_IF_ERROR(internal::AgreeOnDescriptor(comm, descriptor, errors, "Reshard", call));

  SyncPlan plan;
  internal::SyncPlanAccess::Init(plan, specs::Sha256(descriptor.dump()), budget);
  SHARDKIT_RETURN_IF_ERROR(
      Annotate(Plan(tensor, *new_shards, budget, comm, call, start, plan), "Reshard"));
  // A failure here is this rank's alone: the status round turns it into every rank's same error
  // before any byte moves.
  Side side;
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(
      comm, PrepareSide(tensor, *bound, *new_shards, plan, comm, side), "Reshard", call));
  SyncReport report;
  std::vector<int64_t> done(1, 0);
  SHARDKIT_RETURN_IF_ERROR(side.mover->Run({}, call, report, done));
  return *std::move(side.result);
}

}  // namespace shardkit
