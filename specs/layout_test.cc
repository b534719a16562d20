// Layout arithmetic: worked examples of PyTorch's chunk split (ChunkShardingSpec) with
// shardkit's empty-shard semantics (zero-size chunks kept, offsets clamped to the dim size), dim
// resolution, and Bind.
#include "specs/layout.h"

#include "testing/status_matchers.h"

namespace shardkit::specs {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

std::vector<Placement> Ranks(int64_t k) {
  std::vector<Placement> out;
  for (int64_t r = 0; r < k; ++r) out.push_back(Placement::ForRank(r, Device::Cpu()));
  return out;
}

struct Row {
  Shape shape;
  int64_t dim;
  int64_t k;
  int64_t split;
  std::vector<Shape> offsets;  // per placement
  std::vector<Shape> sizes;
};

TEST(LayoutTest, WorkedExamplesTable) {
  const Row rows[] = {
      {{10, 20}, 0, 4, 3, {{0, 0}, {3, 0}, {6, 0}, {9, 0}}, {{3, 20}, {3, 20}, {3, 20}, {1, 20}}},
      {{10, 32}, 1, 4, 8, {{0, 0}, {0, 8}, {0, 16}, {0, 24}}, {{10, 8}, {10, 8}, {10, 8}, {10, 8}}},
      {{10, 10}, -1, 4, 3, {{0, 0}, {0, 3}, {0, 6}, {0, 9}}, {{10, 3}, {10, 3}, {10, 3}, {10, 1}}},
      {{13}, 0, 4, 4, {{0}, {4}, {8}, {12}}, {{4}, {4}, {4}, {1}}},
      // PyTorch (later): 5th shard at offset 15; shardkit clamps to 12.
      {{12}, 0, 5, 3, {{0}, {3}, {6}, {9}, {12}}, {{3}, {3}, {3}, {3}, {0}}},
      {{9, 12}, 0, 4, 3, {{0, 0}, {3, 0}, {6, 0}, {9, 0}}, {{3, 12}, {3, 12}, {3, 12}, {0, 12}}},
      // PyTorch (later): last offset 6 > 5; shardkit clamps to 5.
      {{5, 2}, 0, 4, 2, {{0, 0}, {2, 0}, {4, 0}, {5, 0}}, {{2, 2}, {2, 2}, {1, 2}, {0, 2}}},
      // PyTorch (later): offsets [2,0], [3,0]; shardkit clamps both to 2.
      {{2, 20}, 0, 4, 1, {{0, 0}, {1, 0}, {2, 0}, {2, 0}}, {{1, 20}, {1, 20}, {0, 20}, {0, 20}}},
      {{1}, 0, 3, 1, {{0}, {1}, {1}}, {{1}, {0}, {0}}},
      // PyTorch 1.13: an empty list; shardkit: two zero-size shards.
      {{0, 4}, 0, 2, 0, {{0, 0}, {0, 0}}, {{0, 4}, {0, 4}}},
      {{4, 5, 6}, -3, 2, 2, {{0, 0, 0}, {2, 0, 0}}, {{2, 5, 6}, {2, 5, 6}}},
  };
  for (const Row& row : rows) {
    const std::string label =
        absl::StrCat(ShapeToString(row.shape), " dim ", row.dim, " k ", row.k);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(int64_t dim, ResolveDim(row.dim, row.shape));
    EXPECT_EQ(SplitSize(row.shape[dim], row.k), row.split) << label;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(
        std::vector<ShardMetadata> shards,
        BuildMetadata(ChunkShardingSpec{row.dim, Ranks(row.k)}, row.shape));
    ASSERT_EQ(shards.size(), static_cast<size_t>(row.k)) << label;
    for (int64_t i = 0; i < row.k; ++i) {
      EXPECT_EQ(shards[i].offsets, row.offsets[i]) << label << " shard " << i;
      EXPECT_EQ(shards[i].sizes, row.sizes[i]) << label << " shard " << i;
      EXPECT_EQ(shards[i].placement.rank(), i) << label;  // chunk i goes to placements[i]
    }
    // Chunk layouts always tile the tensor.
    EXPECT_THAT(ValidateTiling(shards, row.shape), IsOk()) << label;
  }
}

// "align": A rounds the split up to a multiple of A: split = ceil(ceil(n/k)/A)*A; otherwise the
// same rule (sizes clamped, zero-size chunks past the end kept at offset n).
TEST(LayoutTest, AlignedSplits) {
  struct AlignedRow {
    int64_t n, k, align, split;
    std::vector<int64_t> offsets, sizes;
  };
  const AlignedRow rows[] = {
      {300, 3, 128, 128, {0, 128, 256}, {128, 128, 44}},
      {300, 4, 128, 128, {0, 128, 256, 300}, {128, 128, 44, 0}},  // zero-size tail
      {256, 2, 128, 128, {0, 128}, {128, 128}},
      {100, 3, 128, 128, {0, 100, 100}, {100, 0, 0}},  // one block: all on the first chunk
      {10, 4, 4, 4, {0, 4, 8, 10}, {4, 4, 2, 0}},
      {12, 3, 1, 4, {0, 4, 8}, {4, 4, 4}},  // align 1 is PyTorch's split
      {12, 3, 4, 4, {0, 4, 8}, {4, 4, 4}},  // already a multiple
      {12, 3, 5, 5, {0, 5, 10}, {5, 5, 2}},
      {0, 2, 4, 0, {0, 0}, {0, 0}},
      {1, 3, 7, 7, {0, 1, 1}, {1, 0, 0}},
  };
  for (const AlignedRow& row : rows) {
    const std::string label = absl::StrCat("n ", row.n, " k ", row.k, " align ", row.align);
    EXPECT_EQ(SplitSize(row.n, row.k, row.align), row.split) << label;
    ChunkShardingSpec spec{0, Ranks(row.k)};
    spec.align = row.align;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<ShardMetadata> shards,
                                  BuildMetadata(spec, {row.n, 3}));
    ASSERT_EQ(shards.size(), static_cast<size_t>(row.k)) << label;
    for (int64_t i = 0; i < row.k; ++i) {
      EXPECT_EQ(shards[i].offsets, (Shape{row.offsets[i], 0})) << label << " shard " << i;
      EXPECT_EQ(shards[i].sizes, (Shape{row.sizes[i], 3})) << label << " shard " << i;
    }
    EXPECT_THAT(ValidateTiling(shards, {row.n, 3}), IsOk()) << label;
  }
  // On another dim, with a negative dim.
  ChunkShardingSpec columns{-1, Ranks(2)};
  columns.align = 3;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<ShardMetadata> shards, BuildMetadata(columns, {2, 7}));
  EXPECT_EQ(shards[0].sizes, (Shape{2, 6}));
  EXPECT_EQ(shards[1].offsets, (Shape{0, 6}));
  EXPECT_EQ(shards[1].sizes, (Shape{2, 1}));
}

// What block-quantized FP8 checkpoints rely on: a weight of n rows cut with align b over k
// placements, and its scales (ceil(n/b) rows) cut without align over the same k, have the same
// boundaries in blocks (ceil(ceil(n/k)/b) = ceil(ceil(n/b)/k)); every weight boundary but the
// end is a multiple of b.
TEST(LayoutTest, AlignedWeightBoundariesMatchTheScaleSplit) {
  const auto ceil_div = [](int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); };
  for (int64_t b : {1, 2, 3, 128}) {
    for (int64_t k = 1; k <= 8; ++k) {
      for (int64_t n = 0; n <= 600; ++n) {
        const int64_t blocks = ceil_div(n, b);
        const int64_t weight_split = SplitSize(n, k, b);
        const int64_t scale_split = SplitSize(blocks, k);
        for (int64_t i = 0; i < k; ++i) {
          const std::string label = absl::StrCat("n ", n, " k ", k, " b ", b, " chunk ", i);
          const int64_t begin = ChunkOffset(n, weight_split, i);
          const int64_t end = begin + ChunkSize(n, weight_split, i);
          ASSERT_TRUE(begin % b == 0 || begin == n) << label;
          ASSERT_TRUE(end % b == 0 || end == n) << label;
          const int64_t scale_begin = ChunkOffset(blocks, scale_split, i);
          ASSERT_EQ(ceil_div(begin, b), scale_begin) << label;
          ASSERT_EQ(ceil_div(end, b), scale_begin + ChunkSize(blocks, scale_split, i)) << label;
        }
      }
    }
  }
}

TEST(LayoutTest, PlacementOrderIsChunkOrderAndRanksMayRepeat) {
  std::vector<Placement> placements = {Placement::ForRank(2), Placement::ForRank(0),
                                       Placement::ForRank(2)};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<ShardMetadata> shards,
                                BuildMetadata(ChunkShardingSpec{1, placements}, {10, 8}));
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[0].placement.rank(), 2);
  EXPECT_EQ(shards[1].placement.rank(), 0);
  EXPECT_EQ(shards[2].placement.rank(), 2);
  EXPECT_EQ(shards[2].offsets, (Shape{0, 6}));
  EXPECT_EQ(shards[2].sizes, (Shape{10, 2}));
}

TEST(LayoutTest, ArithmeticNeverOverflows) {
  const int64_t n = INT64_MAX;
  const int64_t split = SplitSize(n, 3);
  EXPECT_EQ(split, n / 3 + 1);
  EXPECT_EQ(ChunkSize(n, split, 0) + ChunkSize(n, split, 1) + ChunkSize(n, split, 2), n);
  EXPECT_EQ(ChunkOffset(n, split, 2), 2 * split);
  // Rounding up past what 64 bits hold saturates: the first chunk takes everything.
  EXPECT_EQ(SplitSize(n, 1, 2), n);
  EXPECT_EQ(SplitSize(n, 3, n), n);
  const int64_t saturated = SplitSize(n, 1, n - 1);  // 2 blocks of n - 1
  EXPECT_EQ(saturated, n);
  EXPECT_EQ(ChunkSize(n, saturated, 0), n);
  // Near the limit without saturating: one block of n - 2, then the 1 left, then nothing.
  const int64_t near = SplitSize(n - 1, 3, n - 2);
  EXPECT_EQ(near, n - 2);
  EXPECT_EQ(ChunkSize(n - 1, near, 0), n - 2);
  EXPECT_EQ(ChunkSize(n - 1, near, 1), 1);
  EXPECT_EQ(ChunkSize(n - 1, near, 2), 0);
  EXPECT_EQ(ChunkOffset(n - 1, near, 2), n - 1);
}

TEST(LayoutTest, DimChecks) {
  EXPECT_THAT(ResolveDim(-1, {3, 4}), IsOkAndHolds(1));
  for (int64_t dim : {2, 3, 4, -3, -4, -5}) {  // PyTorch's test_invalid_sharding dims
    EXPECT_THAT(ResolveDim(dim, {3, 4}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("dim ", dim,
                                                " is out of range for a 2-d tensor (shape [3, "
                                                "4]); expected -2..1"))));
  }
  EXPECT_THAT(
      BuildMetadata(ChunkShardingSpec{0, Ranks(2)}, {}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a 0-d tensor cannot be chunked")));
}

TEST(LayoutTest, ValidatesSpecAndShape) {
  EXPECT_THAT(
      BuildMetadata(ChunkShardingSpec{0, std::vector<Placement>{}}, {4}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("placements must not be empty")));
  ChunkShardingSpec unaligned{0, Ranks(2)};
  unaligned.align = 0;
  EXPECT_THAT(BuildMetadata(unaligned, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("align must be >= 1, got 0")));
  EXPECT_THAT(BuildMetadata(ChunkShardingSpec{0, Ranks(2)}, {-4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[-4]")));
  EXPECT_THAT(BuildMetadata(ChunkShardingSpec{0, PlacementShorthand{}}, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Bind")));
  EXPECT_THAT(BuildMetadata(EnumerableShardingSpec{}, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shards must not be empty")));
  EXPECT_THAT(
      BuildMetadata(EnumerableShardingSpec{{{{0}, {3}, Placement::ForRank(0)}}}, {4}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shards do not cover the tensor")));
}

TEST(BindTest, ResolvesDimAndExpandsShorthand) {
  ChunkShardingSpec spec{-1, PlacementShorthand{AllRanks{}, Device::Cpu()}};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardingSpec bound, Bind(spec, {4, 6}, 3));
  EXPECT_EQ(bound, ShardingSpec(ChunkShardingSpec{1, Ranks(3)}));
  // dim 1 with the same placements binds to the same spec.
  EXPECT_THAT(Bind(ChunkShardingSpec{1, Ranks(3)}, {4, 6}, 3), IsOkAndHolds(bound));

  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec ranged,
      Bind(ChunkShardingSpec{0, PlacementShorthand{RankRange{1, 2}, {}}}, {4}, 4));
  EXPECT_EQ(ranged, ShardingSpec(ChunkShardingSpec{
                        0, std::vector<Placement>{Placement::ForRank(1), Placement::ForRank(2)}}));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec listed,
      Bind(ChunkShardingSpec{0, PlacementShorthand{RankList{2, 0, 2}, Device::Cuda()}}, {4}, 3));
  EXPECT_EQ(std::get<std::vector<Placement>>(std::get<ChunkShardingSpec>(listed).placements)[2],
            Placement::ForRank(2, Device::Cuda()));

  // align survives binding (the shorthand expanded, the dim resolved).
  ChunkShardingSpec aligned{-2, PlacementShorthand{AllRanks{}, Device::Cpu()}};
  aligned.align = 128;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardingSpec bound_aligned, Bind(aligned, {300, 256}, 3));
  ChunkShardingSpec expected{0, Ranks(3)};
  expected.align = 128;
  EXPECT_EQ(bound_aligned, ShardingSpec(expected));
  EXPECT_NE(bound_aligned, ShardingSpec(ChunkShardingSpec{0, Ranks(3)}));
  ChunkShardingSpec negative_align = aligned;
  negative_align.align = -1;
  EXPECT_THAT(
      Bind(negative_align, {300, 256}, 3),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("align must be >= 1, got -1")));
}

TEST(BindTest, Errors) {
  ChunkShardingSpec all{0, PlacementShorthand{}};
  EXPECT_THAT(Bind(all, {4}, std::nullopt), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     HasSubstr("once the world size is known")));
  EXPECT_THAT(Bind(all, {4}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world size 0")));
  EXPECT_THAT(Bind(ChunkShardingSpec{0, Ranks(3)}, {4}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shard 2 (offsets [4], sizes [0], rank:2/cpu) is placed on rank "
                                 "2, outside the world of 2 ranks")));
  EXPECT_THAT(Bind(ChunkShardingSpec{0, PlacementShorthand{RankRange{0, 2000000000}, {}}}, {4}, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank range 0..2000000000 is outside the world of 3 ranks")));
  EXPECT_THAT(
      Bind(ChunkShardingSpec{0, PlacementShorthand{RankList{0}, {}}}, {4}, std::nullopt),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("once the world size is known")));
  EXPECT_THAT(Bind(ChunkShardingSpec{0, PlacementShorthand{RankRange{3, 1}, {}}}, {4}, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("first <= last")));
  // Without a world size, explicit placements bind (no rank check).
  EXPECT_THAT(Bind(ChunkShardingSpec{-1, Ranks(9)}, {4}, std::nullopt), IsOk());
}

// {"ranks": "all"} expands to one placement per rank: a claimed world of 2^31 must be an error,
// not 2^31 placements (std::bad_alloc). Every entry point checks the same kMaxWorldSize.
TEST(WorldSizeTest, ExpansionIsBoundedByKMaxWorldSize) {
  constexpr char kTooBig[] = "world size 1048577 is outside [1, 1048576]";
  EXPECT_EQ(kMaxWorldSize, 1 << 20);
  EXPECT_THAT(ValidateWorldSize(kMaxWorldSize), IsOk());
  EXPECT_THAT(ValidateWorldSize(0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world size 0 is outside")));
  EXPECT_THAT(ValidateWorldSize(kMaxWorldSize + 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(kTooBig)));

  const Placements all = PlacementShorthand{AllRanks{}, Device::Cpu()};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<Placement> expanded,
                                ExpandPlacements(all, kMaxWorldSize));
  ASSERT_EQ(expanded.size(), static_cast<size_t>(kMaxWorldSize));
  EXPECT_EQ(expanded.back(), Placement::ForRank(kMaxWorldSize - 1, Device::Cpu()));
  EXPECT_THAT(ExpandPlacements(all, kMaxWorldSize + 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(kTooBig)));
  EXPECT_THAT(ExpandPlacements(all, int64_t{1} << 31),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("world size 2147483648 is outside [1, 1048576]")));
  const ChunkShardingSpec chunk{0, all};
  EXPECT_THAT(ValidateRanks(chunk, kMaxWorldSize + 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(kTooBig)));
  EXPECT_THAT(Bind(chunk, {4}, kMaxWorldSize + 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(kTooBig)));
  // A range is bounded by the world, so by kMaxWorldSize too.
  EXPECT_THAT(ExpandPlacements(PlacementShorthand{RankRange{0, kMaxRank}, {}}, kMaxWorldSize),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outside the world of 1048576 ranks")));
}

}  // namespace
}  // namespace shardkit::specs
