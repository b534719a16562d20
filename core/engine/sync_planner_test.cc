// Weight sync's planner in one process, no communication: the segments a round posts
// (RoundSegments), the runs a gathered send takes (RunCount), the rounds' merge, and a property
// test that walks random layouts for every rank of a world and checks what PlanSync's ranks rely
// on without ever comparing notes: every destination byte is written exactly once, from a source
// shard that holds it; every send is some rank's receive; every rank derives the same rounds; and
// both sides of every pair cut every round into the same segments.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_merge.h"
#include "core/engine/internal/sync_walk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit::internal {
namespace {

using ::testing::ElementsAre;

SyncPiece Piece(int from, int to, int64_t bytes, int round = 0) {
  return {.from = from, .to = to, .bytes = bytes, .round = round};
}
SyncPiece Coalesced(int from, int to, int64_t bytes, int round = 0) {
  SyncPiece p = Piece(from, to, bytes, round);
  p.coalesced = p.staged_send = p.staged_recv = true;
  return p;
}
SyncPiece Strided(int from, int to, int64_t bytes, int64_t runs) {
  SyncPiece p = Piece(from, to, bytes);
  p.staged_send = p.staged_recv = true;
  p.send_runs = runs;
  return p;
}

using Sizes = std::vector<std::vector<uint64_t>>;

TEST(RoundSegments, ContiguousPiecesAreASegmentEachInPlanOrder) {
  const std::vector<SyncPiece> sends = {Piece(0, 1, 100), Piece(0, 2, 7), Piece(0, 1, 30)};
  const RoundShape shape = RoundSegments(sends, {}, 0, 3);
  EXPECT_EQ(shape.sends, (Sizes{{}, {100, 30}, {7}}));
  EXPECT_EQ(shape.recvs, (Sizes{{}, {}, {}}));
}

TEST(RoundSegments, CoalescedPiecesOfAPairTravelAsOneSegmentAheadOfTheRest) {
  const std::vector<SyncPiece> receives = {Piece(1, 0, 500), Coalesced(1, 0, 10),
                                           Coalesced(2, 0, 4), Coalesced(1, 0, 20)};
  const RoundShape shape = RoundSegments({}, receives, 0, 3);
  EXPECT_EQ(shape.recvs, (Sizes{{}, {30, 500}, {4}}));
}

TEST(RoundSegments, LocalPiecesAndOtherRoundsPostNothing) {
  const std::vector<SyncPiece> receives = {Piece(0, 0, 64), Piece(1, 0, 8, /*round=*/1),
                                           Coalesced(1, 0, 3, /*round=*/1), Piece(1, 0, 9)};
  EXPECT_EQ(RoundSegments({}, receives, 0, 2).recvs, (Sizes{{}, {9}}));
  EXPECT_EQ(RoundSegments({}, receives, 1, 2).recvs, (Sizes{{}, {3, 8}}));
}

// Gathered or packed, a strided piece is one segment, the same size on its receiver.
TEST(RoundSegments, AStridedPieceIsASegmentOfItsOwnOnBothSides) {
  const std::vector<SyncPiece> pieces = {Strided(0, 1, 4096, 16), Coalesced(0, 1, 5)};
  EXPECT_EQ(RoundSegments(pieces, {}, 0, 2).sends, (Sizes{{}, {5, 4096}}));
  EXPECT_EQ(RoundSegments({}, pieces, 0, 2).recvs, (Sizes{{5, 4096}, {}}));
}

TEST(SentGathered, OnlyStridedUncoalescedPiecesOfLongEnoughRunsOnABackendThatGathers) {
  EXPECT_TRUE(SentGathered(Strided(0, 1, 4096, 16), true));
  EXPECT_FALSE(SentGathered(Strided(0, 1, 4096, 16), false));
  EXPECT_FALSE(SentGathered(Strided(0, 1, 4096, 4096), true));  // 1-byte runs: packed
  EXPECT_FALSE(SentGathered(Coalesced(0, 1, 100), true));
  EXPECT_FALSE(SentGathered(Piece(0, 1, 4096), true));  // contiguous: sent as it is
}

TEST(RunCount, WholeTrailingDimensionsMergeIntoOneRun) {
  const specs::Box shard{{0, 0, 0}, {4, 6, 8}};
  EXPECT_EQ(RunCount(shard, {{0, 0, 0}, {4, 6, 8}}), 1);  // the whole shard
  EXPECT_EQ(RunCount(shard, {{1, 0, 0}, {2, 6, 8}}), 1);  // rows
  EXPECT_EQ(RunCount(shard, {{0, 2, 0}, {4, 3, 8}}), 4);  // a block of the middle dim
  EXPECT_EQ(RunCount(shard, {{0, 0, 4}, {4, 6, 4}}), 24);
  EXPECT_EQ(RunCount({{10, 20}, {4, 6}}, {{11, 23}, {2, 3}}), 2);  // offsets are global
}

TEST(StagedPerRound, CountsStagedBytesAndAGatheredSendsRunsPerRoundAndDirection) {
  SyncPiece strided = Strided(0, 1, 4096, 16);
  strided.round = 1;
  const std::vector<SyncPiece> sends = {Piece(0, 1, 100), Coalesced(0, 1, 10), strided};
  const std::vector<SyncPiece> receives = {Coalesced(1, 0, 6, 1)};
  EXPECT_THAT(StagedPerRound(sends, receives, 2, false), ElementsAre(10, 0, 4096, 6));
  EXPECT_THAT(StagedPerRound(sends, receives, 2, true),
              ElementsAre(10, 0, 16 * kGatheredRunBytes, 6));
}

TEST(MergeRounds, ConsecutiveRoundsJoinWhileEveryRankFitsTheBucket) {
  // Two ranks, four rounds; per rank: (send, receive) per round.
  const std::vector<std::vector<int64_t>> per_rank = {{10, 0, 10, 0, 90, 0, 5, 0},
                                                      {0, 10, 0, 10, 0, 5, 0, 90}};
  EXPECT_THAT(MergeRounds(per_rank, 4, 100), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(MergeRounds(per_rank, 4, 1000), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(MergeRounds(per_rank, 4, 20), ElementsAre(0, 0, 1, 2));
}

// --- The property test -----------------------------------------------------------------------

// One side's layout of one parameter, as PlanSync's box cache builds it.
SyncBoxes Boxes(std::vector<specs::Box> boxes, std::vector<int> group_ranks, int group_size,
                bool replicated) {
  SyncBoxes b;
  b.by_rank.resize(group_size);
  for (size_t i = 0; i < boxes.size(); ++i) b.by_rank[group_ranks[i]].push_back(i);
  b.boxes = boxes;
  b.group_ranks = std::move(group_ranks);
  b.replicated = replicated;
  b.index =
      specs::ShardBoxIndex(replicated ? std::vector<specs::Box>{boxes.front()} : std::move(boxes));
  return b;
}

// A random layout of `shape` over a group of `g`: replicated, or a grid with uneven and empty
// cells (an enumerable spec), each cell on a random member (several, one or none per member).
SyncBoxes RandomLayout(std::mt19937& rng, const Shape& shape, int g) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  if (pick(5) == 0) {
    std::vector<specs::Box> boxes(g, specs::Box{Shape(shape.size(), 0), shape});
    std::vector<int> ranks(g);
    for (int r = 0; r < g; ++r) ranks[r] = r;
    return Boxes(boxes, ranks, g, true);
  }
  std::vector<std::vector<int64_t>> cuts(shape.size());  // per dim: cut points from 0 to size
  for (size_t d = 0; d < shape.size(); ++d) {
    cuts[d] = {0, shape[d]};
    for (int k = pick(3); k > 0; --k) cuts[d].push_back(pick(static_cast<int>(shape[d]) + 1));
    std::sort(cuts[d].begin(), cuts[d].end());
  }
  std::vector<specs::Box> boxes(1, specs::Box{});
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<specs::Box> next;
    for (const specs::Box& b : boxes) {
      for (size_t c = 0; c + 1 < cuts[d].size(); ++c) {
        specs::Box cell = b;
        cell.offsets.push_back(cuts[d][c]);
        cell.sizes.push_back(cuts[d][c + 1] - cuts[d][c]);
        next.push_back(cell);
      }
    }
    boxes = std::move(next);
  }
  std::vector<int> ranks;
  for (size_t i = 0; i < boxes.size(); ++i) ranks.push_back(pick(g));
  return Boxes(boxes, ranks, g, false);
}

int64_t Elements(const specs::Box& box) {
  int64_t n = 1;
  for (int64_t s : box.sizes) n *= s;
  return n;
}

bool Inside(const specs::Box& inner, const specs::Box& outer) {
  for (size_t d = 0; d < inner.sizes.size(); ++d) {
    if (inner.offsets[d] < outer.offsets[d] ||
        inner.offsets[d] + inner.sizes[d] > outer.offsets[d] + outer.sizes[d]) {
      return false;
    }
  }
  return true;
}

bool Overlap(const specs::Box& a, const specs::Box& b) {
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) {
      return false;
    }
  }
  return true;
}

std::vector<int> RandomGroup(std::mt19937& rng, int world) {
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  std::shuffle(ranks.begin(), ranks.end(), rng);
  ranks.resize(1 + rng() % static_cast<unsigned>(world));
  return ranks;
}

auto Id(const SyncPiece& p) {
  return std::make_tuple(p.parameter, p.destination_shard, p.source_shard, p.part, p.from, p.to,
                         p.round, p.box.offsets, p.box.sizes, p.bytes);
}

// Plans one random layout on every rank and checks the plan's invariants; `seed` names it.
void CheckRandomLayout(uint32_t seed) {
  std::mt19937 rng(seed);
  const int world = 1 + static_cast<int>(rng() % 8);
  SyncGroups groups{RandomGroup(rng, world), RandomGroup(rng, world)};
  if (rng() % 4 == 0) groups.destination = groups.source;  // the same ranks
  const int params = 1 + static_cast<int>(rng() % 4);
  const DType dtype = rng() % 2 ? DType::kFloat32 : DType::kBFloat16;
  const int64_t element = static_cast<int64_t>(ElementSize(dtype));
  const int64_t bucket = std::vector<int64_t>{16, 256, 4096, int64_t{1} << 30}[rng() % 4];
  std::vector<SyncBoxes> sources, destinations;
  for (int i = 0; i < params; ++i) {
    Shape shape;
    for (int d = static_cast<int>(rng() % 4); d > 0; --d) shape.push_back(rng() % 8);
    sources.push_back(RandomLayout(rng, shape, static_cast<int>(groups.source.size())));
    destinations.push_back(RandomLayout(rng, shape, static_cast<int>(groups.destination.size())));
  }
  const std::string where = absl::StrCat("seed ", seed, ", world ", world);
  std::vector<std::vector<SyncPiece>> sends(world), receives(world);
  std::vector<int> rounds(world);
  for (int me = 0; me < world; ++me) {
    SyncWalker walker(groups, me, world, bucket);
    for (int i = 0; i < params; ++i) walker.Parameter(i, sources[i], destinations[i], dtype);
    rounds[me] = walker.rounds();
    sends[me] = walker.TakeSends();
    receives[me] = walker.TakeReceives();
  }
  ASSERT_EQ(std::count(rounds.begin(), rounds.end(), rounds[0]), world) << where;
  // The rounds' merge, from every rank's staging (what MergeRoundsAcrossRanks all-gathers).
  const bool gathers = rng() % 2;
  std::vector<std::vector<int64_t>> staged;
  for (int r = 0; r < world; ++r) {
    staged.push_back(StagedPerRound(sends[r], receives[r], rounds[0], gathers));
  }
  const std::vector<int> merged = MergeRounds(staged, rounds[0], bucket);
  for (int r = 0; r < world; ++r) {
    for (SyncPiece& p : sends[r]) p.round = merged[p.round];
    for (SyncPiece& p : receives[r]) p.round = merged[p.round];
  }
  std::map<decltype(Id(SyncPiece{})), int> in_flight;  // sends minus receives
  for (int r = 0; r < world; ++r) {
    for (const SyncPiece& p : sends[r]) {
      ASSERT_EQ(p.from, r) << where;
      ASSERT_NE(p.to, r) << where;
      ++in_flight[Id(p)];
    }
    for (const SyncPiece& p : receives[r]) {
      ASSERT_EQ(p.to, r) << where;
      const SyncBoxes& src = sources[p.parameter];
      const SyncBoxes& dst = destinations[p.parameter];
      ASSERT_EQ(groups.source[src.group_ranks[p.source_shard]], p.from) << where;
      ASSERT_EQ(groups.destination[dst.group_ranks[p.destination_shard]], p.to) << where;
      ASSERT_TRUE(Inside(p.box, src.boxes[p.source_shard])) << where << ": not held by its source";
      ASSERT_TRUE(Inside(p.box, dst.boxes[p.destination_shard])) << where;
      ASSERT_EQ(p.bytes, Elements(p.box) * element) << where;
      if (p.from != p.to) --in_flight[Id(p)];
    }
  }
  for (const auto& [id, count] : in_flight) ASSERT_EQ(count, 0) << where << ": a send unmatched";
  // Every destination shard is covered exactly once: disjoint pieces whose sizes add up.
  for (int r = 0; r < world; ++r) {
    std::map<std::pair<size_t, size_t>, std::vector<const specs::Box*>> by_shard;
    for (const SyncPiece& p : receives[r]) {
      by_shard[{p.parameter, p.destination_shard}].push_back(&p.box);
    }
    for (int i = 0; i < params; ++i) {
      const SyncBoxes& dst = destinations[i];
      for (size_t j = 0; j < dst.boxes.size(); ++j) {
        if (groups.destination[dst.group_ranks[j]] != r) continue;
        const std::vector<const specs::Box*>& pieces = by_shard[{i, j}];
        int64_t covered = 0;
        for (size_t a = 0; a < pieces.size(); ++a) {
          covered += Elements(*pieces[a]);
          for (size_t b = a + 1; b < pieces.size(); ++b) {
            ASSERT_FALSE(Overlap(*pieces[a], *pieces[b])) << where << ": a byte written twice";
          }
        }
        ASSERT_EQ(covered, Elements(dst.boxes[j]))
            << where << ": parameter " << i << " shard " << j << " on rank " << r;
      }
    }
  }
  // Both sides of every pair cut every round into the same segments.
  const int total = merged.empty() ? 1 : merged.back() + 1;
  for (int round = 0; round < total; ++round) {
    std::vector<RoundShape> shapes;
    for (int r = 0; r < world; ++r) {
      shapes.push_back(RoundSegments(sends[r], receives[r], round, world));
    }
    for (int a = 0; a < world; ++a) {
      for (int b = 0; b < world; ++b) {
        if (a == b) continue;
        ASSERT_EQ(shapes[a].sends[b], shapes[b].recvs[a]) << where << " round " << round;
      }
    }
  }
}

TEST(SyncPlanner, RandomLayoutsOnEveryRankAgreeAndCoverEveryByteOnce) {
  for (uint32_t seed = 1; seed <= 1500; ++seed) {
    CheckRandomLayout(seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace shardkit::internal
