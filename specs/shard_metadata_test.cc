// ShardMetadata validation, overlap and coverage (PyTorch's rules for enumerable specs) with
// shardkit's rules: integer offsets/sizes, zero sizes allowed, only positive-volume intersections
// overlap.
#include "specs/shard_metadata.h"

#include <random>

#include "testing/status_matchers.h"

namespace shardkit::specs {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

ShardMetadata S(Shape offsets, Shape sizes, int64_t rank = 0) {
  return ShardMetadata{std::move(offsets), std::move(sizes), Placement::ForRank(rank)};
}

TEST(ShardMetadataTest, LengthsMustMatch) {
  EXPECT_THAT(ValidateShardMetadata(S({0, 0}, {1})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("same number of elements, found 2 (offsets [0, 0]) and 1 "
                                 "(sizes [1])")));
}

TEST(ShardMetadataTest, NegativeValuesRejectedPerIndexOffsetsFirst) {
  EXPECT_THAT(ValidateShardMetadata(S({-1}, {1})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("offsets must be >= 0")));
  EXPECT_THAT(ValidateShardMetadata(S({0}, {-1})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sizes must be >= 0")));
  // PyTorch checks offsets[i] then sizes[i] per index: ([0,-1],[-1,1]) reports sizes at i=0.
  EXPECT_THAT(ValidateShardMetadata(S({0, -1}, {-1, 1})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sizes must be >= 0")));
}

TEST(ShardMetadataTest, ZeroSizesAndZeroDimsAreValid) {
  EXPECT_THAT(ValidateShardMetadata(S({3, 0}, {0, 5})), IsOk());
  EXPECT_THAT(ValidateShardMetadata(S({}, {})), IsOk());
}

TEST(ShardMetadataTest, EqualityIsStructural) {
  EXPECT_EQ(S({0, 0}, {5, 5}), S({0, 0}, {5, 5}));
  EXPECT_NE(S({0, 0}, {5, 5}, 0), S({0, 0}, {5, 5}, 1));
  EXPECT_EQ(ShardToString(S({5, 0}, {5, 5}, 1)), "offsets [5, 0], sizes [5, 5], rank:1");
}

TEST(OverlapTest, PositiveVolumeOnly) {
  EXPECT_TRUE(Overlaps(S({0, 0}, {5, 5}), S({0, 0}, {5, 5})));  // identical shards
  EXPECT_TRUE(Overlaps(S({0, 0}, {5, 5}), S({4, 4}, {5, 5})));
  EXPECT_FALSE(Overlaps(S({0, 0}, {5, 5}), S({5, 0}, {5, 5})));  // touching
  // PyTorch reports a zero-size shard strictly inside another as overlapping; shardkit does not.
  EXPECT_FALSE(Overlaps(S({0, 0}, {5, 5}), S({2, 0}, {0, 5})));
  EXPECT_FALSE(Overlaps(S({2, 0}, {0, 5}), S({2, 0}, {0, 5})));  // zero-size duplicates
  EXPECT_TRUE(Overlaps(S({}, {}), S({}, {})));                   // 0-d shards have volume 1
}

TEST(ValidateTilingTest, AcceptsExactTilings) {
  EXPECT_THAT(ValidateTiling({S({0, 0}, {5, 5}), S({5, 0}, {5, 5})}, {10, 5}), IsOk());
  // A 2x2 grid, one rank owning two shards.
  EXPECT_THAT(ValidateTiling({S({0, 0}, {5, 5}, 0), S({0, 5}, {5, 5}, 1), S({5, 0}, {5, 5}, 0),
                              S({5, 5}, {5, 5}, 2)},
                             {10, 10}),
              IsOk());
  // Empty shards anywhere in range, including at the end.
  EXPECT_THAT(ValidateTiling({S({0}, {4}), S({4}, {0}), S({2}, {0})}, {4}), IsOk());
  // All shards zero-volume on an empty tensor.
  EXPECT_THAT(ValidateTiling({S({0, 0}, {0, 4}), S({0, 0}, {0, 4})}, {0, 4}), IsOk());
  EXPECT_THAT(ValidateTiling({S({}, {})}, {}), IsOk());
}

TEST(ValidateTilingTest, ReportsEachCheck) {
  EXPECT_THAT(ValidateTiling({}, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("there are no shards")));
  EXPECT_THAT(
      ValidateTiling({S({0}, {4}), S({0}, {-4})}, {4}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shard 1: sizes must be >= 0")));
  EXPECT_THAT(ValidateTiling({S({0, 0}, {4, 4})}, {4, 4, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shard 0 (offsets [0, 0], sizes [4, 4], rank:0) has 2 dims, but "
                                 "the tensor has 3 (shape [4, 4, 4])")));
  EXPECT_THAT(ValidateTiling({S({0, 0}, {5, 8}), S({5, 0}, {5, 8})}, {8, 8}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shard 1 (offsets [5, 0], sizes [5, 8], rank:0) lies outside the "
                                 "tensor in dim 0: offset 5 + size 5 > 8")));
  // Zero-size shards past the end are out of range too (offsets are clamped by the layout).
  EXPECT_THAT(ValidateTiling({S({0}, {4}), S({6}, {0})}, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lies outside")));
  EXPECT_THAT(ValidateTiling({S({0}, {INT64_MAX}), S({INT64_MAX}, {INT64_MAX})}, {INT64_MAX}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shard 1")));
  EXPECT_THAT(
      ValidateTiling({S({0, 0}, {5, 5}, 0), S({5, 0}, {5, 5}, 1), S({4, 4}, {2, 2}, 2)}, {10, 6}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("shards 0 (offsets [0, 0], sizes [5, 5], rank:0) and 2 (offsets "
                         "[4, 4], sizes [2, 2], rank:2) overlap")));
  EXPECT_THAT(ValidateTiling({S({0, 0}, {10, 9}), S({0, 9}, {1, 1})}, {10, 10}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shards do not cover the tensor: their volumes add up to 91, the "
                                 "tensor's volume is 100 (shape [10, 10])")));
}

// The sweep agrees with the pairwise definition on random boxes of 1 to 4 dims.
TEST(FindOverlapTest, AgreesWithBruteForce) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t ndim = 1 + trial % 4;
    const size_t n = 1 + rng() % 7;
    std::vector<ShardMetadata> shards;
    for (size_t i = 0; i < n; ++i) {
      ShardMetadata s = S(Shape(ndim), Shape(ndim));
      for (size_t d = 0; d < ndim; ++d) {
        s.offsets[d] = rng() % 6;
        s.sizes[d] = rng() % 4;
      }
      shards.push_back(s);
    }
    bool expected = false;
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) expected = expected || Overlaps(shards[i], shards[j]);
    }
    std::optional<std::pair<size_t, size_t>> found = FindOverlap(shards);
    ASSERT_EQ(found.has_value(), expected) << "trial " << trial;
    if (found) {
      EXPECT_TRUE(Overlaps(shards[found->first], shards[found->second]));
    }
  }
}

// 10^6 row shards and a 1000 x 1000 grid: the sweep must not be quadratic.
TEST(FindOverlapTest, MillionShardsIsFast) {
  std::vector<ShardMetadata> rows;
  for (int64_t i = 0; i < 1000000; ++i) rows.push_back(S({i, 0}, {1, 8}));
  EXPECT_THAT(ValidateTiling(rows, {1000000, 8}), IsOk());
  std::vector<ShardMetadata> grid;
  for (int64_t i = 0; i < 1000; ++i) {
    for (int64_t j = 0; j < 1000; ++j) grid.push_back(S({i, j}, {1, 1}));
  }
  EXPECT_THAT(ValidateTiling(grid, {1000, 1000}), IsOk());
  grid.push_back(S({999, 999}, {1, 1}));
  EXPECT_THAT(ValidateTiling(grid, {1000, 1000}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlap")));
}

}  // namespace
}  // namespace shardkit::specs
