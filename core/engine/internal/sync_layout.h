// Internal: one side's layout for weight sync (core/engine/sync.h) — what a module's
// parameters look like across its group — in the compact form the agreement exchanges (each
// parameter's name, dtype, shape and bound spec, distinct specs listed once), the boxes it
// describes (computed once per distinct spec and shape), and the checks PlanSync makes.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_LAYOUT_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_LAYOUT_H_

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"
#include "nlohmann/json.hpp"
#include "specs/fingerprint.h"
#include "specs/shard_box_index.h"
#include "specs/shard_metadata.h"

namespace shardkit::internal {

struct SyncLayout {
  struct Parameter {
    std::string name;
    DType dtype = DType::kFloat32;
    Shape shape;
    int spec = -1;  // index into `specs`; -1: replicated on every rank of the group
  };
  std::vector<std::string> specs;  // distinct canonical JSON of bound specs
  std::vector<Parameter> parameters;
};

// `module`'s layout (a ShardedTensor's bound spec; a plain Tensor is replicated).
SyncLayout LayoutOf(const Module& module);

nlohmann::json LayoutToJson(const SyncLayout& layout);
// Errors: kInvalidArgument if the JSON is not a layout (a peer of another build).
[[nodiscard]] absl::StatusOr<SyncLayout> LayoutFromJson(const nlohmann::json& json);

// The shards one (spec, shape) gives over a group: boxes, their group ranks, an index, and each
// group rank's shard indices. A replicated parameter has one whole box per group rank and an
// index of one box.
struct SyncBoxes {
  std::vector<specs::Box> boxes;
  std::vector<int> group_ranks;
  specs::ShardBoxIndex index;
  std::vector<std::vector<size_t>> by_rank;
  bool replicated = false;
};

// The boxes of `shards` (bound over a group of `group_size`). Errors: kInvalidArgument if a shard
// is placed outside the group.
[[nodiscard]] absl::StatusOr<SyncBoxes> BoxesOf(const std::vector<specs::ShardMetadata>& shards,
                                                int group_size);

// SyncBoxes per (spec, shape) of one side, computed once each.
class SyncBoxCache {
 public:
  SyncBoxCache(const SyncLayout& layout, int group_size)
      : layout_(layout), group_size_(group_size) {}
  // Errors: kInvalidArgument naming the parameter if its spec does not parse or bind.
  [[nodiscard]] absl::StatusOr<const SyncBoxes*> Get(const SyncLayout::Parameter& p);

 private:
  const SyncLayout& layout_;
  int group_size_;
  std::map<std::pair<int, Shape>, std::unique_ptr<SyncBoxes>> cache_;
};

// This rank's local problems with `module` as a member of a side: local tensors that are not
// contiguous, meta, or on a device `comm` cannot move. Each names the side and parameter.
std::vector<std::string> LocalProblems(const Module& module, std::string_view side,
                                       const Communicator& comm);

// Problems between the two agreed layouts: names, shapes and dtypes that differ; specs that do
// not bind over their group. Each names the parameter.
std::vector<std::string> CompareLayouts(const SyncLayout& source, const SyncLayout& destination,
                                        SyncBoxCache& source_boxes,
                                        SyncBoxCache& destination_boxes);

// Problems with one group's world ranks (out of range, repeated, empty), naming the side.
std::vector<std::string> CheckGroup(const std::vector<int>& ranks, std::string_view side,
                                    int world_size);

// The plan's private state, for PlanSync and Sync.
struct SyncPlanAccess {
  static void Init(SyncPlan& plan, const specs::Sha256Digest& digest, int64_t memory_bytes) {
    plan.fingerprint_ = specs::FormatFingerprint(digest);
    std::memcpy(&plan.fingerprint_value_, digest.data(), sizeof(plan.fingerprint_value_));
    plan.memory_bytes_ = memory_bytes;
  }
  static void Finish(SyncPlan& plan, std::vector<std::string> names, int rounds,
                     std::vector<SyncPiece> sends, std::vector<SyncPiece> receives,
                     std::vector<int64_t> receives_per_parameter, absl::Duration planning_time) {
    plan.names_ = std::move(names);
    plan.rounds_ = rounds;
    plan.sends_ = std::move(sends);
    plan.receives_ = std::move(receives);
    plan.receives_per_parameter_ = std::move(receives_per_parameter);
    plan.planning_time_ = planning_time;
    plan.staging_bytes_[0] = MostStagedInARound(plan.sends_, &SyncPiece::staged_send);
    plan.staging_bytes_[1] = MostStagedInARound(plan.receives_, &SyncPiece::staged_recv);
  }
  // The most bytes of `pieces` (ordered by round) flagged `staged` in one round.
  static int64_t MostStagedInARound(const std::vector<SyncPiece>& pieces, bool SyncPiece::*staged) {
    int64_t most = 0, in_round = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (i > 0 && pieces[i].round != pieces[i - 1].round) in_round = 0;
      in_round += pieces[i].*staged ? pieces[i].bytes : 0;
      most = std::max(most, in_round);
    }
    return most;
  }
  // The most one round stages: sends (0), receives (1).
  static int64_t staging_bytes(const SyncPlan& plan, int side) { return plan.staging_bytes_[side]; }
  static const std::vector<int64_t>& receives_per_parameter(const SyncPlan& plan) {
    return plan.receives_per_parameter_;
  }
  // The executor's state kept with the plan (internal/box_mover.h); nullptr until a call made it.
  static std::shared_ptr<MoverState>& mover_state(SyncPlan& plan) { return plan.mover_state_; }
};

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_LAYOUT_H_
