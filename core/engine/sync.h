// Weight sync: move a model from one layout on one group of ranks (the source: trainers) to another
// layout on another group (the destination: an inference server's buffers), again and again,
// planned once.
//
//   // every rank of one communicator; trainers pass their module, servers theirs, others nullptr
//   SyncGroups groups{.source = {0, 1}, .destination = {2, 3}};
//   SHARDKIT_ASSIGN_OR_RETURN(SyncPlan plan, PlanSync(trainer, server, groups, *comm));
//   for (...) {
//     train_step();
//     SHARDKIT_RETURN_IF_ERROR(Sync(plan, trainer, server, *comm));  // servers' buffers updated
//   }
//
// The layouts are the modules' own: a ShardedTensor's shards (its placement ranks are ranks of the
// side's group: placement rank i is world rank groups.source[i]), a plain Tensor is replicated on
// every rank of the group. The groups may be disjoint, overlap or be the same ranks.
//
// PlanSync (collective over every rank of `comm`) agrees once: every rank all-gathers its view
// (the groups, a digest of each layout it holds, the layouts themselves from the first member of
// each group — each parameter's name, dtype, shape and bound spec, distinct specs once — and its
// local problems); every rank checks the same things and so fails with the same error: the groups,
// every member's layout against the first member's, the two layouts against each other (the same
// names, global shapes and dtypes; specs that bind over their group), local shards that are not
// contiguous or live on a device the backend cannot move. Then every rank derives the same rounds
// and its own pieces:
//  - rounds: parameters in order, each rank's bytes of a parameter (what it may stage) added up
//    until some rank would exceed a bucket (a third of `memory_bytes`); then a new round. A
//    parameter larger than a bucket on some rank is cut instead: all its pieces are enumerated, the
//    strided ones split to fit, and pieces fill rounds one by one (the same on every rank);
//  - pieces: this rank's source shards against the destination boxes and its destination shards
//    against the source boxes, through the box-intersection index (specs/shard_box_index.h,
//    built once per distinct spec and shape; never all pairs); a replicated source is read from
//    one holder, this rank's own copy when it has one. A piece contiguous in its tensor moves
//    straight from and into tensor memory; a strided one goes through staging; pieces under
//    64 KiB between two ranks travel as one segment;
//  - then consecutive rounds merge while no rank stages more than a bucket (one AllGather of what
//    each rank really stages per round; internal/sync_merge.h): a sync that stages nothing is one
//    round.
//
// Sync moves bytes only: on host memory a call's rounds are one PreparedTransfer
// (core/comm/prepared_transfer.h), agreed once with the plan's fingerprint and every round's
// segments, run round by round without an agreement and closed by one; on a device each round is
// an AllToAllSegments with the fingerprint in its header. A helper thread packs the next round's
// strided sends into the other send bucket (on a backend that gathers they go as runs, not
// packed); strided receives are unpacked as their segments arrive. The destination tensors are
// updated in place; source tensors are only read.
#ifndef SHARDKIT_CORE_ENGINE_SYNC_H_
#define SHARDKIT_CORE_ENGINE_SYNC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/tensor/allocator.h"
#include "specs/shard_box_index.h"

namespace shardkit {

// The world ranks of each side's group, in group-rank order. Empty: every rank of `comm`.
struct SyncGroups {
  std::vector<int> source;
  std::vector<int> destination;
};

// The staging a box mover works with (SyncOptions::memory_bytes, ReshardOptions::memory_bytes)
// unless the caller gives another, and the least (a smaller budget is raised to it).
inline constexpr int64_t kDefaultMoverMemoryBytes = int64_t{64} << 20;
inline constexpr int64_t kMinMoverMemoryBytes = int64_t{64} << 10;

struct SyncOptions {
  // Staging per rank for strided and small pieces, at least 64 KiB, in three buckets of a third:
  // two for sends (one is packed while the other is on the wire), one for receives.
  int64_t memory_bytes = kDefaultMoverMemoryBytes;
  CallOptions call;  // the deadline of PlanSync
};

// One box of one parameter moving from world rank `from` to world rank `to`.
struct SyncPiece {
  size_t parameter = 0;  // index into SyncPlan::names()
  int64_t part = 0;      // a piece split to fit a bucket: which part (else 0)
  int from = 0;          // world ranks
  int to = 0;
  specs::Box box;  // global coordinates
  int64_t bytes = 0;
  bool staged_send = false;  // strided in the source shard: packed into staging
  bool staged_recv = false;  // strided in the destination shard: unpacked from staging
  // Smaller than 64 KiB: staged on both sides, and all such pieces between two ranks in a round
  // travel as one segment (ahead of the pair's other pieces), so small parameters do not cost a
  // message each.
  bool coalesced = false;
  int round = 0;
  int64_t send_runs = 1;         // its contiguous runs in the source shard (a gathered send's)
  size_t source_shard = 0;       // index in the source layout's shards of the parameter
  size_t destination_shard = 0;  // index in the destination layout's shards
};

struct SyncCallOptions {
  // Compare a SHA-256 digest of every piece between its sender and its receiver after the move.
  bool verify = false;
  // Testing only: runs on this rank after the bytes moved, before verify's digests.
  std::function<void()> after_move_for_test;
  // Testing only: runs on this rank before each round's exchange, with the round (from 0).
  std::function<void(int round)> before_round_for_test;
  CallOptions call;  // the deadline of the whole call
};

struct SyncReport {
  // This rank's destination parameters whose every piece arrived (all of them on success; on
  // failure the others are torn). Empty on ranks outside the destination group.
  std::vector<std::string> updated;
  int64_t bytes_received = 0;  // from other ranks
  int64_t bytes_copied = 0;    // local pieces (overlapping groups)
  double pack_seconds = 0;     // packing strided sends and copying local pieces
  double unpack_seconds = 0;   // unpacking strided receives
};

namespace internal {
struct SyncPlanAccess;
struct MoverState;
}  // namespace internal

class SyncPlan {
 public:
  // "sha256:…" of both layouts, the groups and the budget; the same on every rank.
  const std::string& fingerprint() const { return fingerprint_; }
  uint64_t fingerprint_value() const { return fingerprint_value_; }
  const std::vector<std::string>& names() const { return names_; }
  int rounds() const { return rounds_; }
  // This rank's pieces, by round, in plan order. A local piece (from == to: overlapping groups) is
  // only in receives() and is copied tensor to tensor.
  const std::vector<SyncPiece>& sends() const { return sends_; }
  const std::vector<SyncPiece>& receives() const { return receives_; }
  int64_t memory_bytes() const { return memory_bytes_; }
  // This rank's pieces (sends and receives).
  size_t pieces() const { return sends_.size() + receives_.size(); }
  absl::Duration planning_time() const { return planning_time_; }

 private:
  friend struct internal::SyncPlanAccess;

  std::string fingerprint_;
  uint64_t fingerprint_value_ = 0;
  std::vector<std::string> names_;
  int rounds_ = 0;
  std::vector<SyncPiece> sends_;
  std::vector<SyncPiece> receives_;
  int64_t memory_bytes_ = 0;
  absl::Duration planning_time_;
  std::vector<int64_t> receives_per_parameter_;  // this rank's receive count per parameter
  int64_t staging_bytes_[2] = {0, 0};            // the most one round stages: sends, receives
  // Not the plan: the executor's staging and caches (internal/box_mover.h), kept with the plan so
  // that every Sync call reuses them. Made by the first call.
  std::shared_ptr<internal::MoverState> mover_state_;
};

// Collective over every rank of `comm`. `source` is non-null exactly on the source group's ranks,
// `destination` on the destination group's. Errors: kInvalidArgument, the same on every rank,
// naming the rank, parameter and what differs; transport errors as the Communicator's.
[[nodiscard]] absl::StatusOr<SyncPlan> PlanSync(const Module* source, const Module* destination,
                                                const SyncGroups& groups, Communicator& comm,
                                                const SyncOptions& options = {});

// Collective over every rank of `comm`, with the modules PlanSync saw (the same tensors, or
// tensors of the same shapes, dtypes and devices). Errors: kInvalidArgument (every rank) if the
// ranks' plans differ; with verify, kDataLoss (every rank) naming parameter, piece and ranks of
// the first mismatching digests; transport errors as the Communicator's (a rank that dies or
// stalls is named by every other; the communicator is poisoned, and a new plan is needed on a new
// communicator). `report`, if given, is filled also on failure.
[[nodiscard]] absl::Status Sync(SyncPlan& plan, const Module* source, Module* destination,
                                Communicator& comm, const SyncCallOptions& options = {},
                                SyncReport* report = nullptr);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_ENGINE_SYNC_H_
