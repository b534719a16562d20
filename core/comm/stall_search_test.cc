// The stall search over a store shared by threads standing in for ranks (the processes' form is
// core/engine/sync_fault_test.cc's SourceStalledPastTheDeadline, over real Gloo).
#include "core/comm/stall_search.h"

#include <thread>

#include "absl/time/clock.h"
#include "core/store/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit {
namespace {

constexpr absl::Duration kGrace = absl::Milliseconds(100);

TEST(StallSearch, FollowsTheRecordsToTheRankThatWroteNone) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("p/waiting/2", "1").ok());    // rank 2 waited on rank 1's bytes
  ASSERT_TRUE(store.Set("p/waiting/3", "2,0").ok());  // rank 3 on the tree's ranks 2 and 0
  EXPECT_EQ(FindStalledRank(store, "p", 0, {1, 2}, kGrace), 1);
  EXPECT_EQ(FindStalledRank(store, "p", 3, {2, 0}, kGrace), 1);
  EXPECT_EQ(*store.Get("p/waiting/0", absl::ZeroDuration()), "1,2");  // its own record
}

TEST(StallSearch, ARecordWrittenDuringTheGraceIsFollowed) {
  MemoryStore store;
  std::thread late([&store] {
    absl::SleepFor(absl::Milliseconds(30));
    ASSERT_TRUE(store.Set("p/waiting/1", "4").ok());  // rank 1 reached its deadline later
  });
  EXPECT_EQ(FindStalledRank(store, "p", 0, {1}, absl::Milliseconds(400)), 4);
  late.join();
}

TEST(StallSearch, RecordsThatLeadNowhereNameNoOne) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("p/waiting/1", "2").ok());
  ASSERT_TRUE(store.Set("p/waiting/2", "1").ok());  // a cycle: no rank stopped
  EXPECT_EQ(FindStalledRank(store, "p", 0, {1}, kGrace), -1);
  EXPECT_EQ(FindStalledRank(store, "p", 0, {}, kGrace), -1);  // waiting on no one
}

TEST(StallSearch, TheGraceIsATenthOfTheBudgetWithinBounds) {
  EXPECT_EQ(StallGrace(absl::Seconds(2)), absl::Milliseconds(200));
  EXPECT_EQ(StallGrace(absl::Milliseconds(100)), absl::Milliseconds(50));
  EXPECT_EQ(StallGrace(absl::Seconds(600)), absl::Milliseconds(500));
}

}  // namespace
}  // namespace shardkit
