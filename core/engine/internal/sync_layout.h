// Internal: one side's layout for weight sync (core/engine/sync_plan.h) — what a module's
// parameters look like across its group — as data, as JSON for the agreement, and the checks
// PlanSync makes on every rank.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_LAYOUT_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_LAYOUT_H_

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/engine/sync_plan.h"
#include "nlohmann/json.hpp"
#include "specs/fingerprint.h"
#include "specs/shard_box_index.h"

namespace shardkit::internal {

// One parameter on one side. A replicated parameter (a plain Tensor in the module) has one full
// box per group rank.
struct SyncParameter {
  std::string name;
  Shape shape;
  DType dtype = DType::kFloat32;
  bool replicated = false;
  std::vector<specs::Box> boxes;
  std::vector<int> group_ranks;  // the group rank holding boxes[i]
};

using SyncLayout = std::vector<SyncParameter>;

// `module`'s layout over a group of `group_size` ranks.
SyncLayout LayoutOf(const Module& module, int group_size);

nlohmann::json LayoutToJson(const SyncLayout& layout);
// Errors: kInvalidArgument if the JSON is not a layout (a peer of another build).
[[nodiscard]] absl::StatusOr<SyncLayout> LayoutFromJson(const nlohmann::json& json);

// This rank's local problems with `module` as a member of a side: local tensors that are not
// contiguous, meta, or on a device `comm` cannot move. Each names the side and parameter.
std::vector<std::string> LocalProblems(const Module& module, std::string_view side,
                                       const Communicator& comm);

// Problems between the two agreed layouts: names, shapes and dtypes that differ, placement ranks
// outside the group. Each names the parameter.
std::vector<std::string> CompareLayouts(const SyncLayout& source, const SyncLayout& destination,
                                        int source_size, int destination_size);

// Problems with one group's world ranks (out of range, repeated, empty), naming the side.
std::vector<std::string> CheckGroup(const std::vector<int>& ranks, std::string_view side,
                                    int world_size);

// The local tensor holding shard `shard` of parameter `name` of `module` (a ShardedTensor's local
// shard, or the plain tensor of a replicated parameter), and that shard's offsets.
struct SyncTensor {
  Tensor tensor;
  Shape offsets;
};
[[nodiscard]] absl::StatusOr<SyncTensor> LocalSyncTensor(const Module& module,
                                                         const std::string& name, size_t shard);

// The plan's private state, for PlanSync and Sync.
struct SyncPlanAccess {
  static void Init(SyncPlan& plan, const specs::Sha256Digest& digest, int64_t memory_bytes) {
    plan.fingerprint_ = specs::FormatFingerprint(digest);
    std::memcpy(&plan.fingerprint_value_, digest.data(), sizeof(plan.fingerprint_value_));
    plan.memory_bytes_ = memory_bytes;
  }
  static void Finish(SyncPlan& plan, std::vector<std::string> names, int rounds, size_t total,
                     std::vector<SyncPiece> sends, std::vector<SyncPiece> receives,
                     std::vector<int64_t> receives_per_parameter, absl::Duration planning_time) {
    plan.names_ = std::move(names);
    plan.rounds_ = rounds;
    plan.total_pieces_ = total;
    plan.sends_ = std::move(sends);
    plan.receives_ = std::move(receives);
    plan.receives_per_parameter_ = std::move(receives_per_parameter);
    plan.planning_time_ = planning_time;
  }
  static const std::vector<int64_t>& receives_per_parameter(const SyncPlan& plan) {
    return plan.receives_per_parameter_;
  }
  static std::shared_ptr<Storage>& send_staging(SyncPlan& plan, int slot) {
    return plan.send_staging_[slot];
  }
  static std::shared_ptr<Storage>& recv_staging(SyncPlan& plan) { return plan.recv_staging_; }
};

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_LAYOUT_H_
