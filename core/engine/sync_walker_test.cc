// The box mover's planner in one process, case by case (sync_planner_test.cc holds the property
// test): which pieces one rank derives for weight sync's layouts and for Reshard's (the same
// ranks on both sides), their staging, the rounds they fall in, and the rounds' merge.
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_merge.h"
#include "core/engine/internal/sync_walk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int64_t kKiB = 1024;
constexpr int64_t kHuge = int64_t{1} << 40;  // a bucket nothing fills

// `shape` cut along `dim` into blocks of `sizes`, block i on group rank owners[i] (default: i).
SyncBoxes Blocks(const Shape& shape, size_t dim, const std::vector<int64_t>& sizes,
                 std::vector<int> owners = {}) {
  if (owners.empty()) {
    for (size_t i = 0; i < sizes.size(); ++i) owners.push_back(static_cast<int>(i));
  }
  SyncBoxes b;
  int64_t at = 0;
  int group = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    specs::Box box{Shape(shape.size(), 0), shape};
    box.offsets[dim] = at;
    box.sizes[dim] = sizes[i];
    at += sizes[i];
    b.boxes.push_back(box);
    b.group_ranks.push_back(owners[i]);
    group = std::max(group, owners[i] + 1);
  }
  b.by_rank.resize(group);
  for (size_t i = 0; i < owners.size(); ++i) b.by_rank[owners[i]].push_back(i);
  b.index = specs::ShardBoxIndex(b.boxes);
  return b;
}

// `shape` whole on each of `g` group ranks.
SyncBoxes Replicated(const Shape& shape, int g) {
  SyncBoxes b;
  b.replicated = true;
  b.by_rank.resize(g);
  for (int r = 0; r < g; ++r) {
    b.boxes.push_back({Shape(shape.size(), 0), shape});
    b.group_ranks.push_back(r);
    b.by_rank[r].push_back(r);
  }
  b.index = specs::ShardBoxIndex({b.boxes.front()});
  return b;
}

struct Walked {
  int rounds = 0;
  std::vector<SyncPiece> sends, receives;
  std::vector<int64_t> per_parameter;
};

// One rank's walk of `params` (source, destination boxes), float32.
Walked Walk(const SyncGroups& groups, int me, int world, int64_t bucket,
            const std::vector<std::pair<const SyncBoxes*, const SyncBoxes*>>& params) {
  SyncWalker walker(groups, me, world, bucket);
  for (size_t i = 0; i < params.size(); ++i) {
    walker.Parameter(i, *params[i].first, *params[i].second, DType::kFloat32);
  }
  Walked w;
  w.rounds = walker.rounds();
  w.sends = walker.TakeSends();
  w.receives = walker.TakeReceives();
  w.per_parameter = walker.receives_per_parameter;
  return w;
}

specs::Box Box(Shape offsets, Shape sizes) { return {std::move(offsets), std::move(sizes)}; }

const Shape kSquare = {256, 256};  // float32: 256 KiB; a quarter is 64 KiB (not coalesced)
const SyncGroups kTwo = {{0, 1}, {0, 1}};

// --- Reshard's layouts: the same ranks on both sides ------------------------------------------

TEST(SyncWalker, ReshardRowsToColumnsKeepsTheDiagonalAndSendsTheRest) {
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128}), cols = Blocks(kSquare, 1, {128, 128});
  const Walked w = Walk(kTwo, 0, 2, kHuge, {{&rows, &cols}});
  ASSERT_THAT(w.receives, SizeIs(2));
  EXPECT_EQ(w.receives[0].from, 0);  // kept: copied shard to shard
  EXPECT_EQ(w.receives[0].box, Box({0, 0}, {128, 128}));
  EXPECT_FALSE(w.receives[0].staged_send || w.receives[0].staged_recv);
  EXPECT_EQ(w.receives[1].from, 1);
  EXPECT_EQ(w.receives[1].box, Box({128, 0}, {128, 128}));
  ASSERT_THAT(w.sends, SizeIs(1));
  EXPECT_EQ(w.sends[0].to, 1);
  EXPECT_EQ(w.sends[0].box, Box({0, 128}, {128, 128}));
  EXPECT_EQ(w.sends[0].bytes, 64 * kKiB);
  EXPECT_EQ(w.rounds, 1);
}

TEST(SyncWalker, ReshardToTheSameLayoutIsAllLocal) {
  const SyncBoxes rows = Blocks(kSquare, 0, {100, 156});
  for (int me = 0; me < 2; ++me) {
    const Walked w = Walk(kTwo, me, 2, kHuge, {{&rows, &rows}});
    EXPECT_THAT(w.sends, IsEmpty());
    ASSERT_THAT(w.receives, SizeIs(1));
    EXPECT_EQ(w.receives[0].from, me);
    EXPECT_EQ(w.receives[0].box, rows.boxes[me]);
  }
}

TEST(SyncWalker, AStridedSourceBoxIsPackedAndAContiguousDestinationBoxIsNot) {
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128}), cols = Blocks(kSquare, 1, {128, 128});
  const SyncPiece sent = Walk(kTwo, 0, 2, kHuge, {{&rows, &cols}}).sends.at(0);
  EXPECT_TRUE(sent.staged_send);   // half of each row of rank 0's rows
  EXPECT_FALSE(sent.staged_recv);  // the top half of rank 1's columns: contiguous there
  EXPECT_FALSE(sent.coalesced);
  EXPECT_EQ(sent.send_runs, 128);  // one run per row
}

TEST(SyncWalker, ColumnsToRowsStageOnTheReceiverOnly) {
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128}), cols = Blocks(kSquare, 1, {128, 128});
  const SyncPiece sent = Walk(kTwo, 0, 2, kHuge, {{&cols, &rows}}).sends.at(0);
  EXPECT_EQ(sent.box, Box({128, 0}, {128, 128}));
  EXPECT_FALSE(sent.staged_send);
  EXPECT_TRUE(sent.staged_recv);
  EXPECT_EQ(sent.send_runs, 1);
}

TEST(SyncWalker, PiecesUnder64KiBAreCoalescedAndStagedOnBothSides) {
  const Shape small = {16, 16};
  const SyncBoxes rows = Blocks(small, 0, {8, 8}), cols = Blocks(small, 1, {8, 8});
  const SyncPiece sent = Walk(kTwo, 0, 2, kHuge, {{&rows, &cols}}).sends.at(0);
  EXPECT_EQ(sent.bytes, 8 * 8 * 4);
  EXPECT_TRUE(sent.coalesced);
  EXPECT_TRUE(sent.staged_send);
  EXPECT_TRUE(sent.staged_recv);
}

TEST(SyncWalker, EmptyShardsMoveNothing) {
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128}), skewed = Blocks(kSquare, 0, {256, 0});
  const Walked one = Walk(kTwo, 1, 2, kHuge, {{&rows, &skewed}});
  EXPECT_THAT(one.receives, IsEmpty());
  ASSERT_THAT(one.sends, SizeIs(1));
  EXPECT_EQ(one.sends[0].box, Box({128, 0}, {128, 256}));
  EXPECT_THAT(one.per_parameter, ElementsAre(0));
}

TEST(SyncWalker, SeveralShardsPerRankEachMeetEveryDestinationShard) {
  // Rank 0 holds row blocks 0 and 2, rank 1 blocks 1 and 3 (an enumerable spec).
  const SyncBoxes rows = Blocks(kSquare, 0, {64, 64, 64, 64}, {0, 1, 0, 1});
  const SyncBoxes cols = Blocks(kSquare, 1, {128, 128});
  const Walked w = Walk(kTwo, 0, 2, kHuge, {{&rows, &cols}});
  ASSERT_THAT(w.sends, SizeIs(2));
  EXPECT_EQ(w.sends[0].source_shard, 0u);
  EXPECT_EQ(w.sends[1].source_shard, 2u);
  ASSERT_THAT(w.receives, SizeIs(4));  // a piece of each row block, two of them its own
  int64_t bytes = 0;
  for (const SyncPiece& p : w.receives) bytes += p.bytes;
  EXPECT_EQ(bytes, 128 * kKiB);
}

// --- Weight sync's layouts: two groups -------------------------------------------------------

TEST(SyncWalker, DisjointGroupsWithTheSameSpecMoveEachShardWhole) {
  const SyncGroups groups{{0, 1}, {2, 3}};
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128});
  const Walked source = Walk(groups, 1, 4, kHuge, {{&rows, &rows}});
  ASSERT_THAT(source.sends, SizeIs(1));
  EXPECT_EQ(source.sends[0].to, 3);
  EXPECT_FALSE(source.sends[0].staged_send || source.sends[0].staged_recv);
  EXPECT_THAT(source.receives, IsEmpty());
  const Walked destination = Walk(groups, 3, 4, kHuge, {{&rows, &rows}});
  ASSERT_THAT(destination.receives, SizeIs(1));
  EXPECT_EQ(destination.receives[0].from, 1);
  EXPECT_EQ(destination.receives[0].bytes, 128 * kKiB);
}

TEST(SyncWalker, AReplicatedSourceIsReadFromTheDestinationRanksOwnCopy) {
  const SyncGroups groups{{0, 1}, {1, 2}};  // rank 1 is in both
  const SyncBoxes whole = Replicated(kSquare, 2), rows = Blocks(kSquare, 0, {128, 128});
  const Walked one = Walk(groups, 1, 3, kHuge, {{&whole, &rows}});
  ASSERT_THAT(one.receives, SizeIs(1));
  EXPECT_EQ(one.receives[0].from, 1);  // its own copy, no transfer
  // Rank 2 holds no copy: destination shard 1 is read from holder 1 % 2, world rank 1.
  ASSERT_THAT(one.sends, SizeIs(1));
  EXPECT_EQ(one.sends[0].to, 2);
  EXPECT_THAT(Walk(groups, 0, 3, kHuge, {{&whole, &rows}}).sends, IsEmpty());
}

TEST(SyncWalker, AReplicatedSourceSpreadsItsHoldersByDestinationShard) {
  const SyncGroups groups{{0, 1}, {2, 3}};
  const SyncBoxes whole = Replicated(kSquare, 2), rows = Blocks(kSquare, 0, {128, 128});
  for (int holder = 0; holder < 2; ++holder) {
    const Walked w = Walk(groups, holder, 4, kHuge, {{&whole, &rows}});
    ASSERT_THAT(w.sends, SizeIs(1));
    EXPECT_EQ(w.sends[0].to, 2 + holder);
    EXPECT_EQ(w.sends[0].destination_shard, static_cast<size_t>(holder));
  }
}

TEST(SyncWalker, AReplicatedDestinationReceivesTheWholeTensorOnEveryMember) {
  const SyncGroups groups{{0, 1}, {2, 3}};
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128}), whole = Replicated(kSquare, 2);
  for (int me = 2; me < 4; ++me) {
    const Walked w = Walk(groups, me, 4, kHuge, {{&rows, &whole}});
    ASSERT_THAT(w.receives, SizeIs(2));
    EXPECT_EQ(w.receives[0].from, 0);
    EXPECT_EQ(w.receives[1].from, 1);
    EXPECT_EQ(w.receives[0].bytes + w.receives[1].bytes, 256 * kKiB);
  }
  EXPECT_THAT(Walk(groups, 0, 4, kHuge, {{&rows, &whole}}).sends, SizeIs(2));
}

TEST(SyncWalker, ARankInNeitherGroupHasNoPieces) {
  const SyncGroups groups{{0}, {1}};
  const SyncBoxes one = Blocks(kSquare, 0, {256});
  const Walked w = Walk(groups, 2, 3, kHuge, {{&one, &one}});
  EXPECT_THAT(w.sends, IsEmpty());
  EXPECT_THAT(w.receives, IsEmpty());
  EXPECT_EQ(w.rounds, Walk(groups, 0, 3, kHuge, {{&one, &one}}).rounds);
}

// --- Rounds ---------------------------------------------------------------------------------

TEST(SyncWalker, ParametersShareARoundUntilSomeRanksBucketIsFull) {
  const Shape half = {128, 256};  // 128 KiB: 64 KiB per rank on each side
  const SyncBoxes rows = Blocks(half, 0, {64, 64}), cols = Blocks(half, 1, {128, 128});
  const Walked w = Walk(kTwo, 0, 2, 150 * kKiB, {{&rows, &cols}, {&rows, &cols}, {&rows, &cols}});
  EXPECT_EQ(w.rounds, 2);
  ASSERT_THAT(w.sends, SizeIs(3));
  EXPECT_EQ(w.sends[0].round, 0);
  EXPECT_EQ(w.sends[1].round, 0);
  EXPECT_EQ(w.sends[2].round, 1);
}

TEST(SyncWalker, AParameterLargerThanABucketIsCutIntoPartsThatFit) {
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128}), cols = Blocks(kSquare, 1, {128, 128});
  const int64_t bucket = 16 * kKiB;
  const Walked w = Walk(kTwo, 0, 2, bucket, {{&rows, &cols}});
  ASSERT_THAT(w.sends, SizeIs(4));  // 64 KiB strided, cut in four along its rows
  int64_t covered = 0, row = 0;
  for (size_t i = 0; i < w.sends.size(); ++i) {
    const SyncPiece& p = w.sends[i];
    EXPECT_LE(p.bytes, bucket);
    EXPECT_EQ(p.box.offsets[0], row);
    row += p.box.sizes[0];
    covered += p.bytes;
    if (i > 0) {
      EXPECT_NE(p.part, w.sends[i - 1].part);
    }
  }
  EXPECT_EQ(covered, 64 * kKiB);
  EXPECT_GE(w.rounds, 4);
}

TEST(SyncWalker, EveryRankDerivesTheSameRoundsForACutParameter) {
  const SyncBoxes rows = Blocks(kSquare, 0, {100, 156}), cols = Blocks(kSquare, 1, {37, 219});
  const Walked zero = Walk(kTwo, 0, 2, 16 * kKiB, {{&rows, &cols}});
  const Walked one = Walk(kTwo, 1, 2, 16 * kKiB, {{&rows, &cols}});
  EXPECT_EQ(zero.rounds, one.rounds);
  // Each of rank 0's sends is rank 1's receive in the same round, with the same part.
  std::vector<std::tuple<int, int64_t, specs::Box>> sent, received;
  for (const SyncPiece& p : zero.sends) sent.emplace_back(p.round, p.part, p.box);
  for (const SyncPiece& p : one.receives) {
    if (p.from == 0) received.emplace_back(p.round, p.part, p.box);
  }
  EXPECT_EQ(sent, received);
}

TEST(SyncWalker, PiecesAreOrderedByRoundParameterAndShards) {
  const SyncBoxes rows = Blocks(kSquare, 0, {64, 64, 64, 64}, {0, 1, 0, 1});
  const SyncBoxes cols = Blocks(kSquare, 1, {64, 64, 64, 64}, {0, 1, 0, 1});
  const Walked w = Walk(kTwo, 1, 2, kHuge, {{&rows, &cols}, {&cols, &rows}});
  for (const std::vector<SyncPiece>* pieces : {&w.sends, &w.receives}) {
    for (size_t i = 1; i < pieces->size(); ++i) {
      const SyncPiece& a = (*pieces)[i - 1];
      const SyncPiece& b = (*pieces)[i];
      EXPECT_LT(std::tie(a.round, a.parameter, a.destination_shard, a.source_shard, a.part),
                std::tie(b.round, b.parameter, b.destination_shard, b.source_shard, b.part));
    }
  }
  EXPECT_THAT(w.per_parameter, ElementsAre(8, 8));
}

TEST(MergeRounds, OneRoundStaysOne) {
  EXPECT_THAT(MergeRounds({{5, 5}, {0, 7}}, 1, 1), ElementsAre(0));
}

TEST(MergeRounds, ARoundOverTheBucketStaysAlone) {
  // Rank 0 stages 150 to send in round 0 (a piece that cannot be cut), 10 in round 1.
  EXPECT_THAT(MergeRounds({{150, 0, 10, 0, 10, 0}}, 3, 100), ElementsAre(0, 1, 1));
}

TEST(StagedPerRound, ContiguousPiecesStageNothing) {
  const SyncBoxes rows = Blocks(kSquare, 0, {128, 128});
  const SyncGroups groups{{0, 1}, {2, 3}};
  const Walked w = Walk(groups, 0, 4, kHuge, {{&rows, &rows}});
  EXPECT_THAT(StagedPerRound(w.sends, w.receives, w.rounds, false), ElementsAre(0, 0));
}

TEST(RunCount, AWholeShardIsOneRunAndAMiddleSliceOneRunPerOuterIndex) {
  const specs::Box shard = Box({0, 0, 0}, {4, 6, 8});
  EXPECT_EQ(RunCount(shard, shard), 1);
  EXPECT_EQ(RunCount(shard, Box({0, 2, 0}, {4, 3, 8})), 4);
  EXPECT_EQ(RunCount(shard, Box({1, 2, 0}, {1, 3, 8})), 1);
  EXPECT_EQ(RunCount(shard, Box({0, 0, 4}, {4, 6, 4})), 24);
}

}  // namespace
}  // namespace shardkit::internal
