// Internal: PlanSync's last step (core/engine/sync.h) — consecutive rounds merged where every
// rank's staging still fits a bucket. The walker cuts rounds by an upper bound of what each rank
// may stage (a parameter's whole shards), so that ranks agree on them without enumerating each
// other's pieces; once each rank knows its own pieces, one all-gather of what each actually
// stages per round lets every rank merge the same rounds. Where nothing is staged (contiguous
// pieces, or strided sends on a backend that gathers) a call then has one round instead of
// dozens, each of which costs an exchange's start and end on every rank.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_MERGE_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_MERGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/prepared_transfer.h"
#include "core/engine/sync.h"

namespace shardkit::internal {

// What a gathered send costs per run beyond the tensor's own memory: its HostRun and the
// backend's iovec.
inline constexpr int64_t kGatheredRunBytes = 32;
// Runs shorter than this on average are packed instead: the bookkeeping stays under half the
// piece's bytes, and a staged round's memory within its bucket.
inline constexpr int64_t kShortestGatheredRun = 2 * kGatheredRunBytes;

// Whether piece `p` (a send) is handed to the backend as runs rather than packed: the backend
// gathers (PreparedTransfer::Gathers; host memory only), and the piece is strided, not coalesced
// with others, and of runs of kShortestGatheredRun bytes or more on average.
inline bool SentGathered(const SyncPiece& p, bool backend_gathers) {
  return backend_gathers && p.staged_send && !p.coalesced &&
         p.bytes >= kShortestGatheredRun * p.send_runs;
}

// The number of contiguous runs of `box` inside `shard` (row-major; whole trailing dimensions
// merge into one run; core/tensor/byte_runs.h): what gathering the piece takes.
int64_t RunCount(const specs::Box& shard, const specs::Box& box);

// Per round (ordered pieces, `rounds` of them): this rank's staging, sends then receives, as
// 2 * rounds values.
std::vector<int64_t> StagedPerRound(const std::vector<SyncPiece>& sends,
                                    const std::vector<SyncPiece>& receives, int rounds,
                                    bool backend_gathers);

// The segments of round `round` as Sync's exchange posts them, for PreparedTransfer: per peer,
// the pair's coalesced pieces (staged on both sides) as one segment first, then each other piece
// of the round in plan order, a segment of its own however it is sent (straight, gathered or
// packed) or received (straight or staged); local pieces none.
RoundShape RoundSegments(const std::vector<SyncPiece>& sends,
                         const std::vector<SyncPiece>& receives, int round, int world);

// Every rank's StagedPerRound (all-gathered) -> the merged round of each round: consecutive rounds
// join while no rank stages more than `bucket` per direction in the merged round.
std::vector<int> MergeRounds(const std::vector<std::vector<int64_t>>& per_rank, int rounds,
                             int64_t bucket);

// All-gathers this rank's StagedPerRound and renumbers the pieces' rounds (collective over every
// rank of `comm`). Returns the number of rounds. Errors: the all-gather's.
absl::StatusOr<int> MergeRoundsAcrossRanks(std::vector<SyncPiece>& sends,
                                           std::vector<SyncPiece>& receives, int rounds,
                                           int64_t bucket, Communicator& comm,
                                           const CallOptions& call);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_MERGE_H_
