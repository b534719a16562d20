#include "core/engine/internal/sync_merge.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/tensor/byte_runs.h"

namespace shardkit::internal {

int64_t RunCount(const specs::Box& shard, const specs::Box& box) {
  std::vector<int64_t> offsets(box.offsets.size());
  for (size_t d = 0; d < offsets.size(); ++d) offsets[d] = box.offsets[d] - shard.offsets[d];
  absl::StatusOr<ByteRuns> runs = RunsOf(shard.sizes, /*element_bits=*/8, offsets, box.sizes);
  return runs.ok() ? runs->count : 1;  // bytes never cut: always ok
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

RoundShape RoundSegments(const std::vector<SyncPiece>& sends,
                         const std::vector<SyncPiece>& receives, int round, int world) {
  RoundShape shape{std::vector<std::vector<uint64_t>>(world),
                   std::vector<std::vector<uint64_t>>(world)};
  // Each side: the coalesced run of every peer first (when it has bytes), then the pieces.
  auto side = [&](const std::vector<SyncPiece>& pieces, bool sending,
                  std::vector<std::vector<uint64_t>>& out) {
    std::vector<uint64_t> run(world);
    for (const SyncPiece& p : pieces) {
      if (p.round == round && p.coalesced && p.from != p.to)
        run[sending ? p.to : p.from] += p.bytes;
    }
    for (int peer = 0; peer < world; ++peer) {
      if (run[peer] > 0) out[peer].push_back(run[peer]);
    }
    for (const SyncPiece& p : pieces) {
      if (p.round == round && p.from != p.to && !p.coalesced) {
        out[sending ? p.to : p.from].push_back(p.bytes);
      }
    }
  };
  side(sends, true, shape.sends);
  side(receives, false, shape.recvs);
  return shape;
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
  const std::vector<int64_t> mine =
      StagedPerRound(sends, receives, rounds, PreparedTransfer::Gathers(comm));
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
