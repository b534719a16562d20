#include "integration/checkpoint/stream/memory_budget.h"

#include "gtest/gtest.h"

namespace shardkit::checkpoint {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryBudgetTest, SplitsTheBoundIntoTwoWindowsAndStaging) {
  const Budget budget = SplitBudget(kDefaultMemoryBytes);
  EXPECT_EQ(budget.staging, 4 * kMiB);
  EXPECT_EQ(budget.window, 254 * kMiB);
  EXPECT_EQ(SplitBudget(kDefaultMemoryBytes, 2).window, 252 * kMiB);
  const Budget small = SplitBudget(8 * kMiB);
  EXPECT_EQ(small.staging, 512 << 10);
  EXPECT_EQ(small.window, (8 * kMiB - (512 << 10)) / 2);
}

// Under the default bound a round is the measured size, not the largest the budget allows.
TEST(MemoryBudgetTest, RoundsAreTheMeasuredSizeWithinTheDefault) {
  const Budget budget = SplitBudget(kDefaultMemoryBytes);
  EXPECT_EQ(RoundWindow(budget, kScatterRoundBytes, 2048 * kMiB), kScatterRoundBytes);
  EXPECT_EQ(RoundWindow(budget, kRankRoundBytes * 4, 2048 * kMiB), 64 * kMiB);
  EXPECT_EQ(RoundWindow(budget, kGatherRoundBytes, 2048 * kMiB), 8 * kMiB);
}

TEST(MemoryBudgetTest, TheBudgetStillBoundsTheRound) {
  // Direct on 64 ranks would like 1 GiB windows: the default bound keeps them at 254 MiB.
  EXPECT_EQ(RoundWindow(SplitBudget(kDefaultMemoryBytes), kRankRoundBytes * 64, 2048 * kMiB),
            254 * kMiB);
  const Budget small = SplitBudget(8 * kMiB);
  EXPECT_EQ(RoundWindow(small, kScatterRoundBytes, 2048 * kMiB), small.window);
  EXPECT_EQ(RoundWindow(SplitBudget(1), kScatterRoundBytes, 2048 * kMiB), 1);
}

// A checkpoint smaller than four targets still takes four rounds, so that reading, sending and
// writing overlap; never rounds below 1 MiB for that.
TEST(MemoryBudgetTest, SmallCheckpointsTakeFourRoundsOfAtLeastOneMiB) {
  const Budget budget = SplitBudget(kDefaultMemoryBytes);
  EXPECT_EQ(RoundWindow(budget, kScatterRoundBytes, 87 * kMiB), 87 * kMiB / 4);
  EXPECT_EQ(RoundWindow(budget, kScatterRoundBytes, 2 * kMiB), kMinRoundBytes);
  EXPECT_EQ(RoundWindow(budget, kScatterRoundBytes, 0), kMinRoundBytes);
}

}  // namespace
}  // namespace shardkit::checkpoint
