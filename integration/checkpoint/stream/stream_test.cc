// ByteRuns and StreamSchedule against brute force: every byte of every shard is found where the
// shard's own row-major layout puts it, for shards cut on every dim and for every round size.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/tensor/byte_runs.h"
#include "gtest/gtest.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"

namespace shardkit::checkpoint {
namespace {

// shard byte index -> tensor byte offset, by walking the shard's elements in row-major order.
std::vector<int64_t> BruteForce(const Shape& shape, int64_t element,
                                const specs::ShardMetadata& shard) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = element;
  for (size_t k = shape.size(); k-- > 0;) {
    strides[k] = stride;
    stride *= shape[k];
  }
  int64_t count = 1;
  for (int64_t size : shard.sizes) count *= size;
  std::vector<int64_t> out;
  for (int64_t n = 0; n < count; ++n) {
    int64_t rest = n, offset = 0;
    for (size_t k = shape.size(); k-- > 0;) {
      offset += (shard.offsets[k] + rest % shard.sizes[k]) * strides[k];
      rest /= shard.sizes[k];
    }
    for (int64_t b = 0; b < element; ++b) out.push_back(offset + b);
  }
  return out;
}

specs::ShardMetadata Shard(Shape offsets, Shape sizes, int rank = 0) {
  return {std::move(offsets), std::move(sizes), specs::Placement::ForRank(rank)};
}

TEST(ByteRunsTest, PiecesMatchBruteForceForEveryRange) {
  const Shape shape = {4, 5, 3};
  const std::vector<specs::ShardMetadata> shards = {
      Shard({0, 0, 0}, {4, 5, 3}), Shard({1, 0, 0}, {2, 5, 3}), Shard({0, 1, 0}, {4, 3, 3}),
      Shard({1, 2, 1}, {3, 2, 2}), Shard({0, 0, 2}, {4, 5, 1}), Shard({2, 3, 0}, {1, 1, 3}),
      Shard({0, 0, 0}, {0, 5, 3})};
  const int64_t total = 4 * 5 * 3 * 2;
  for (const specs::ShardMetadata& shard : shards) {
    const ByteRuns runs = *RunsOf(shape, 16, shard);
    const std::vector<int64_t> want = BruteForce(shape, 2, shard);
    ASSERT_EQ(runs.bytes(), static_cast<int64_t>(want.size())) << specs::ShardToString(shard);
    for (int64_t begin = 0; begin <= total; begin += 7) {
      for (int64_t end = begin; end <= total; end += 5) {
        std::map<int64_t, int64_t> got;  // shard index -> tensor offset
        int64_t next = -1;
        ForEachPiece(runs, begin, end, [&](int64_t tensor_at, int64_t shard_at, int64_t bytes) {
          if (next >= 0) {
            EXPECT_EQ(shard_at, next) << "pieces follow each other";
          }
          next = shard_at + bytes;
          for (int64_t b = 0; b < bytes; ++b) got[shard_at + b] = tensor_at + b;
        });
        std::map<int64_t, int64_t> expected;
        for (size_t i = 0; i < want.size(); ++i) {
          if (want[i] >= begin && want[i] < end) expected[static_cast<int64_t>(i)] = want[i];
        }
        ASSERT_EQ(got, expected) << specs::ShardToString(shard) << " [" << begin << ", " << end
                                 << ")";
        const auto [first, count] = ShardSpan(runs, begin, end);
        EXPECT_EQ(count, static_cast<int64_t>(expected.size()));
        if (!expected.empty()) {
          EXPECT_EQ(first, expected.begin()->first);
        }
      }
    }
  }
}

// ForEachRun (what weight sync packs and gathers by) walks the same bytes in the shard's order, for
// shards cut on every dim, whole, empty and of a scalar.
TEST(ByteRunsTest, ForEachRunWalksEveryByteInTheShardsOrder) {
  const Shape shape = {4, 5, 3};
  const std::vector<specs::ShardMetadata> shards = {
      Shard({0, 0, 0}, {4, 5, 3}), Shard({1, 0, 0}, {2, 5, 3}), Shard({0, 1, 0}, {4, 3, 3}),
      Shard({1, 2, 1}, {3, 2, 2}), Shard({0, 0, 2}, {4, 5, 1}), Shard({2, 3, 0}, {1, 1, 3}),
      Shard({0, 0, 0}, {0, 5, 3}), Shard({3, 4, 2}, {1, 1, 1})};
  for (const specs::ShardMetadata& shard : shards) {
    std::vector<int64_t> got;
    ForEachRun(*RunsOf(shape, 16, shard), [&](int64_t at, int64_t bytes) {
      for (int64_t b = 0; b < bytes; ++b) got.push_back(at + b);
    });
    EXPECT_EQ(got, BruteForce(shape, 2, shard)) << specs::ShardToString(shard);
  }
  std::vector<std::pair<int64_t, int64_t>> scalar;
  ForEachRun(*RunsOf({}, 32, Shard({}, {})),
             [&](int64_t at, int64_t bytes) { scalar.emplace_back(at, bytes); });
  EXPECT_EQ(scalar, (std::vector<std::pair<int64_t, int64_t>>{{0, 4}}));
}

TEST(ByteRunsTest, PiecesInOrderMergeEveryShardsPiecesByTensorOffset) {
  // Shards that interleave (dims 1 and 2), one that does not, an empty one, and one given twice.
  const Shape shape = {4, 5, 3};
  const std::vector<specs::ShardMetadata> shards = {
      Shard({0, 0, 0}, {4, 2, 3}), Shard({0, 2, 0}, {4, 3, 1}), Shard({0, 2, 1}, {4, 3, 2}),
      Shard({1, 2, 1}, {3, 2, 2}), Shard({0, 0, 0}, {0, 5, 3}), Shard({0, 0, 0}, {4, 2, 3})};
  std::vector<ByteRuns> runs;
  for (const specs::ShardMetadata& shard : shards) runs.push_back(*RunsOf(shape, 16, shard));
  std::vector<const ByteRuns*> all;
  for (const ByteRuns& r : runs) all.push_back(&r);
  const int64_t total = 4 * 5 * 3 * 2;
  for (int64_t begin = 0; begin <= total; begin += 7) {
    for (int64_t end = begin; end <= total; end += 5) {
      std::map<std::pair<size_t, int64_t>, std::pair<int64_t, int64_t>> expected, got;
      for (size_t i = 0; i < runs.size(); ++i) {
        ForEachPiece(runs[i], begin, end, [&](int64_t at, int64_t shard_at, int64_t bytes) {
          expected[{i, at}] = {shard_at, bytes};
        });
      }
      int64_t last = -1;
      ForEachPieceInOrder(all, begin, end,
                          [&](size_t i, int64_t at, int64_t shard_at, int64_t bytes) {
                            EXPECT_GE(at, last) << "in increasing tensor offset";
                            last = at;
                            got[{i, at}] = {shard_at, bytes};
                          });
      ASSERT_EQ(got, expected) << "[" << begin << ", " << end << ")";
    }
  }
}

TEST(StreamScheduleTest, RoundsDeliverEveryByteOnceToItsRank) {
  // "a": [6, 4] F32 chunked on dim 1 over ranks 2, 0, 1; "b": replicated [3] F32; "c": empty.
  std::vector<StreamTensor> tensors;
  tensors.push_back(*MakeStreamTensor("b", DType::kFloat32, {3}, 96, 108, true, {}));
  tensors.push_back(*MakeStreamTensor(
      "a", DType::kFloat32, {6, 4}, 0, 96, false,
      {Shard({0, 0}, {6, 2}, 2), Shard({0, 2}, {6, 1}, 0), Shard({0, 3}, {6, 1}, 1)}));
  tensors.push_back(*MakeStreamTensor("c", DType::kFloat32, {0}, 108, 108, true, {}));
  for (int64_t window : {1, 5, 16, 50, 108, 1000}) {
    StreamSchedule schedule(tensors, 3, window);
    ASSERT_EQ(schedule.total_bytes(), 108);
    std::map<std::pair<int, std::pair<size_t, int64_t>>, int64_t> seen;  // (rank, (t, s)) -> bytes
    for (int64_t k = 0; k < schedule.rounds(); ++k) {
      const Round round = schedule.MakeRound(k);
      int64_t offset = 0;
      for (const Block& block : round.blocks) {
        EXPECT_EQ(block.window_offset, offset) << "blocks lie back to back";
        offset += block.bytes;
      }
      EXPECT_EQ(offset, static_cast<int64_t>(round.end - round.begin));
      EXPECT_LE(offset, window);
      for (int r = 0; r < 3; ++r) {
        int64_t bytes = 0;
        round.ForEachBlockOf(r, [&](const Block& block) {
          auto& done = seen[{r, {block.tensor, block.shard}}];
          EXPECT_EQ(block.first, done) << "a shard's blocks follow each other";
          done += block.bytes;
          bytes += block.bytes;
        });
        EXPECT_EQ(bytes, round.RankBytes(r));
        EXPECT_LE(bytes, schedule.MaxRankBytes(r));
      }
    }
    const std::vector<StreamTensor>& sorted = schedule.tensors();
    ASSERT_EQ(sorted[0].name, "a");
    EXPECT_EQ((seen[{2, {0, 0}}]), 48) << "window " << window;
    EXPECT_EQ((seen[{0, {0, 1}}]), 24);
    EXPECT_EQ((seen[{1, {0, 2}}]), 24);
    for (int r = 0; r < 3; ++r) EXPECT_EQ((seen[{r, {1, -1}}]), 12) << "replicated to rank " << r;
  }
}

TEST(ByteRunsTest, SubByteShardsMustStartAndEndOnByteBoundaries) {
  // F4 [4, 6]: a row is 24 bits. Two columns (8 bits) are whole bytes; three (12) are not.
  const auto two = RunsOf({4, 6}, 4, Shard({0, 2}, {4, 2}));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->length, 1);
  EXPECT_EQ(two->count, 4);
  EXPECT_EQ(two->Offset(1), 4);  // row 1 starts 3 bytes in: [3] + column 2 (1 byte)
  const auto three = RunsOf({4, 6}, 4, Shard({0, 3}, {4, 3}));
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("at bit 12"), std::string::npos) << three.status();
  // F6 [2, 4]: rows of 24 bits; whole rows are fine, columns 0-1 (12 bits) are not.
  EXPECT_TRUE(RunsOf({2, 4}, 6, Shard({1, 0}, {1, 4})).ok());
  EXPECT_FALSE(RunsOf({2, 4}, 6, Shard({0, 0}, {2, 2})).ok());
  const auto named = MakeStreamTensor("w", DType::kFloat6E2M3, {2, 4}, 0, 6, false,
                                      {Shard({0, 0}, {2, 2}), Shard({0, 2}, {2, 2}, 1)});
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("parameter \"w\" (F6_E2M3[2, 4]): shard 0"),
            std::string::npos)
      << named.status();
}

TEST(StreamScheduleTest, BudgetSplitsIntoTwoWindowsAndStaging) {
  for (int64_t mib : {1, 8, 32, 512, 4096}) {
    const Budget budget = SplitBudget(mib << 20);
    EXPECT_GT(budget.window, 0);
    EXPECT_GT(budget.staging, 0);
    EXPECT_LE(2 * budget.window + budget.staging, mib << 20) << mib << " MiB";
    EXPECT_GE(2 * budget.window + budget.staging, (mib << 20) * 9 / 10) << "uses the budget";
  }
}

}  // namespace
}  // namespace shardkit::checkpoint
