#include "core/engine/internal/sync_merge.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace shardkit::internal {

int64_t RunCount(const specs::Box& shard, const specs::Box& box) {
  int d = static_cast<int>(box.sizes.size()) - 1;
  while (d >= 0 && box.sizes[d] == shard.sizes[d]) --d;  // whole trailing dimensions
  int64_t runs = 1;
  for (int e = 0; e < d; ++e) runs *= box.sizes[e];
  return runs;
}

std::vector<int64_t> StagedPerRound(const std::vector<SyncPiece>& sends,
                                    const std::vector<SyncPiece>& receives, int rounds,
                                    bool backend_gathers) {
  std::vector<int64_t> staged(2 * static_cast<size_t>(rounds), 0);
  for (const SyncPiece& p : sends) {
    if (!p.staged_send) continue;
    staged[2 * p.round] +=
        SentGathered(p, backend_gathers) ? p.send_runs * kGatheredRunBytes : p.bytes;
  }
  for (const SyncPiece& p : receives) {
    if (p.staged_recv) staged[2 * p.round + 1] += p.bytes;
  }
  return staged;
}

std::vector<int> MergeRounds(const std::vector<std::vector<int64_t>>& per_rank, int rounds,
                             int64_t bucket) {
  std::vector<int> merged(rounds, 0);
  std::vector<int64_t> used(2 * per_rank.size(), 0);
  int current = 0;
  for (int r = 0; r < rounds; ++r) {
    bool fits = true;
    for (size_t k = 0; k < per_rank.size() && fits; ++k) {
      for (int side = 0; side < 2; ++side) {
        fits = fits && used[2 * k + side] + per_rank[k][2 * r + side] <= bucket;
      }
    }
    if (!fits && r > 0) {
      ++current;
      std::fill(used.begin(), used.end(), 0);
    }
    for (size_t k = 0; k < per_rank.size(); ++k) {
      for (int side = 0; side < 2; ++side) used[2 * k + side] += per_rank[k][2 * r + side];
    }
    merged[r] = current;
  }
  return merged;
}

absl::StatusOr<int> MergeRoundsAcrossRanks(std::vector<SyncPiece>& sends,
                                           std::vector<SyncPiece>& receives, int rounds,
                                           int64_t bucket, Communicator& comm,
                                           const CallOptions& call) {
  if (rounds <= 1) return rounds;
  const std::vector<int64_t> mine = StagedPerRound(sends, receives, rounds, comm.GathersSends());
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(ConstBuffer(mine), call));
  std::vector<std::vector<int64_t>> per_rank(all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    if (all[k].size() != mine.size() * sizeof(int64_t)) {
      return absl::InternalError(absl::StrCat("PlanSync: rank ", k, " has ", all[k].size() / 16,
                                              " rounds, this rank ", rounds));
    }
    per_rank[k].resize(mine.size());
    std::memcpy(per_rank[k].data(), all[k].data(), all[k].size());
  }
  const std::vector<int> merged = MergeRounds(per_rank, rounds, bucket);
  for (SyncPiece& p : sends) p.round = merged[p.round];
  for (SyncPiece& p : receives) p.round = merged[p.round];
  return merged.back() + 1;
}

}  // namespace shardkit::internal
