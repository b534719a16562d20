#include "core/base/rank_text.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace shardkit {
namespace {

TEST(FormatRanks, NamesRunsOfThreeOrMore) {
  EXPECT_EQ(FormatRanks(std::vector<int>{4}), "rank 4");
  EXPECT_EQ(FormatRanks(std::vector<int>{0, 2}), "ranks 0, 2");
  EXPECT_EQ(FormatRanks(std::vector<int>{0, 1}), "ranks 0, 1");
  EXPECT_EQ(FormatRanks(std::vector<int>{0, 1, 2, 3, 5, 7, 8, 9}), "ranks 0-3, 5, 7-9");
}

TEST(GroupByMessage, OneEntryPerMessageInOrderOfLowestRank) {
  const std::vector<std::pair<int, std::string_view>> messages = {{0, "b"}, {1, "a"}, {2, "b"},
                                                                  {3, "b"}, {4, "b"}, {6, "a"}};
  EXPECT_EQ(GroupByMessage(messages), "ranks 0, 2-4: b; ranks 1, 6: a");
  EXPECT_EQ(GroupsByMessage(messages),
            (std::vector<std::string>{"ranks 0, 2-4: b", "ranks 1, 6: a"}));
}

TEST(TransferProgress, NamesEachPeerOnceAndCountsBytes) {
  TransferProgress progress;
  progress.AddRecv(2, 100, 40);
  progress.AddRecv(2, 50, 0);  // a second segment from the same peer
  progress.AddRecv(1, 10, 10);
  progress.AddSend(3, 8, 8);
  EXPECT_EQ(progress.ToString(),
            "not heard from rank 2 (received 50 of 160 bytes, sent 8 of 8 bytes)");
  progress.AddSend(0, 8, 0);
  EXPECT_EQ(
      progress.ToString(),
      "not heard from rank 2, sends to rank 0 not confirmed (received 50 of 160 bytes, sent 8 "
      "of 16 bytes)");
  EXPECT_EQ(TransferProgress().ToString(),
            "every transfer was confirmed (received 0 of 0 bytes, sent 0 of 0 bytes)");
}

}  // namespace
}  // namespace shardkit
