#include "specs/shard_box_index.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardkit::specs {
namespace {

// Every shard tested against the box: what the index must find.
std::vector<BoxHit> BruteForce(const std::vector<Box>& boxes, const Box& box) {
  std::vector<BoxHit> hits;
  for (size_t s = 0; s < boxes.size(); ++s) {
    BoxHit hit{s, Box{Shape(box.offsets.size()), Shape(box.offsets.size())}};
    bool meets = true;
    for (size_t d = 0; d < box.offsets.size(); ++d) {
      const int64_t begin = std::max(boxes[s].offsets[d], box.offsets[d]);
      const int64_t end =
          std::min(boxes[s].offsets[d] + boxes[s].sizes[d], box.offsets[d] + box.sizes[d]);
      meets = meets && begin < end;
      hit.intersection.offsets[d] = begin;
      hit.intersection.sizes[d] = end - begin;
    }
    if (meets) hits.push_back(hit);
  }
  return hits;
}

void ExpectSame(const std::vector<BoxHit>& got, const std::vector<BoxHit>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shard, want[i].shard);
    EXPECT_EQ(got[i].intersection, want[i].intersection) << "shard " << got[i].shard;
  }
}

TEST(ShardBoxIndex, RowsFindOnlyTheRowsAsked) {
  // [8, 6] cut in 4 row blocks of 2.
  std::vector<ShardMetadata> rows;
  for (int64_t r = 0; r < 4; ++r) rows.push_back({{2 * r, 0}, {2, 6}, Placement::ForRank(r)});
  const ShardBoxIndex index = ShardBoxIndex::FromShards(rows);
  const std::vector<BoxHit> hits = index.Intersecting({{3, 1}, {2, 4}});
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].shard, 1u);
  EXPECT_EQ(hits[0].intersection, (Box{{3, 1}, {1, 4}}));
  EXPECT_EQ(hits[1].shard, 2u);
  EXPECT_EQ(hits[1].intersection, (Box{{4, 1}, {1, 4}}));
  EXPECT_EQ(index.IntersectingInDim(0, 0, 3), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(index.IntersectingInDim(1, 5, 6), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(index.IntersectingInDim(0, 8, 9).empty());
}

TEST(ShardBoxIndex, ZeroSizesScalarsAndOtherRanks) {
  const ShardBoxIndex index(std::vector<Box>{{{0, 0}, {0, 4}}, {{0, 0}, {3, 4}}});
  const std::vector<BoxHit> hits = index.Intersecting({{0, 0}, {3, 4}});
  ASSERT_EQ(hits.size(), 1u) << "a zero-size shard is never found";
  EXPECT_EQ(hits[0].shard, 1u);
  EXPECT_TRUE(index.Intersecting({{0, 0}, {0, 4}}).empty()) << "an empty box meets nothing";
  EXPECT_TRUE(index.Intersecting({{0}, {3}}).empty()) << "another rank meets nothing";
  const ShardBoxIndex scalar(std::vector<Box>{Box{}, Box{}});
  EXPECT_EQ(scalar.Intersecting(Box{}).size(), 2u);
  EXPECT_TRUE(ShardBoxIndex().Intersecting({{0}, {1}}).empty());
}

// Random 1-, 2- and 3-dimensional layouts (overlapping blocks, as replicas and enumerable specs
// allow) against random boxes: the index finds what testing every shard finds.
TEST(ShardBoxIndex, MatchesBruteForce) {
  std::mt19937 random(31);
  for (size_t rank = 1; rank <= 3; ++rank) {
    for (int trial = 0; trial < 50; ++trial) {
      const auto random_box = [&]() {
        Box box{Shape(rank), Shape(rank)};
        for (size_t d = 0; d < rank; ++d) {
          box.offsets[d] = std::uniform_int_distribution<int64_t>(0, 15)(random);
          box.sizes[d] = std::uniform_int_distribution<int64_t>(0, 8)(random);
        }
        return box;
      };
      std::vector<Box> boxes;
      const int shards = std::uniform_int_distribution<int>(0, 12)(random);
      for (int s = 0; s < shards; ++s) boxes.push_back(random_box());
      const ShardBoxIndex index(boxes);
      for (int query = 0; query < 20; ++query) {
        const Box box = random_box();
        ExpectSame(index.Intersecting(box), BruteForce(boxes, box));
      }
    }
  }
}

}  // namespace
}  // namespace shardkit::specs
