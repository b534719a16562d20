// Internal: PlanSync's second step (core/engine/sync.h) — the rounds, the same on every rank,
// and this rank's pieces of each parameter.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_WALK_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_WALK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/sync.h"

namespace shardkit::internal {

class SyncWalker {
 public:
  // `bucket`: the most a rank stages per direction and round.
  SyncWalker(const SyncGroups& groups, int me, int world, int64_t bucket);

  // Adds parameter `index` (its boxes on both sides, its dtype) to the plan.
  void Parameter(size_t index, const SyncBoxes& source, const SyncBoxes& destination, DType dtype);

  int rounds() const { return round_ + 1; }
  // This rank's pieces, by round and then (parameter, destination shard, source shard, part).
  std::vector<SyncPiece> TakeSends();
  std::vector<SyncPiece> TakeReceives();
  std::vector<int64_t> receives_per_parameter;

 private:
  // The source shard a destination shard's piece comes from, for a replicated source: this
  // rank's own copy when the destination rank holds one, else spread by destination shard.
  size_t Holder(const SyncBoxes& source, size_t destination_shard, int to) const;
  // Per-rank bytes of a parameter (an upper bound of what each rank stages for it).
  bool Fits(const SyncBoxes& source, const SyncBoxes& destination, DType dtype);
  void EnumerateMine(size_t index, const SyncBoxes& source, const SyncBoxes& destination,
                     DType dtype);
  void EnumerateAll(size_t index, const SyncBoxes& source, const SyncBoxes& destination,
                    DType dtype);
  SyncPiece Make(size_t index, size_t source_shard, size_t destination_shard, specs::Box box,
                 const SyncBoxes& source, const SyncBoxes& destination, DType dtype) const;
  void Split(SyncPiece piece, const SyncBoxes& source, const SyncBoxes& destination, DType dtype);
  void AssignOne(SyncPiece piece);
  void Keep(SyncPiece piece);
  void NewRound();

  const SyncGroups& groups_;
  std::vector<int> source_index_;       // world rank -> source group rank, or -1
  std::vector<int> destination_index_;  // world rank -> destination group rank, or -1
  int me_;
  int64_t bucket_;
  int round_ = 0;
  int64_t next_part_ = 0;  // the parts of a parameter cut to fit (EnumerateAll)
  std::vector<int64_t> send_used_, recv_used_;
  std::vector<int> touched_;  // ranks whose use is not 0 in this round
  std::vector<int64_t> send_need_, recv_need_;
  std::vector<SyncPiece> sends_, receives_;
};

// One parameter for the planner: its name, dtype and boxes on both sides (from SyncBoxCaches).
struct MoveParameter {
  std::string name;
  const SyncBoxes* source;
  const SyncBoxes* destination;
  DType dtype;
};

// The box mover's one planner, for weight sync (PlanSync) and Reshard: walks `parameters` in
// order (SyncWalker, `bucket` per rank, direction and round), merges rounds where every rank's
// staging fits (MergeRoundsAcrossRanks: one all-gather over `comm`) and completes `plan` (whose
// fingerprint is already set) with the names, the rounds, this rank's pieces and the time since
// `start`. The same rounds on every rank for the same inputs. Errors: the all-gather's.
[[nodiscard]] absl::Status PlanMoves(const std::vector<MoveParameter>& parameters,
                                     const SyncGroups& groups, int64_t bucket, Communicator& comm,
                                     const CallOptions& call, absl::Time start, SyncPlan& plan);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_WALK_H_
