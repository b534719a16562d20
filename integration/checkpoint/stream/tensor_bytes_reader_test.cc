// TensorBytesReader::Want over a real safetensors file: a shard's scattered pieces arrive with
// every byte in place, and the preads it issues keep the coalescing rule (JoinsRead) — each read
// at most 1.25 × the wanted bytes inside it, or with gaps shorter than a page — so that a rank
// reading its columns of rows (reshard row -> column, shard --strategy direct) reads its own bytes
// and not the rows around them.
#include "integration/checkpoint/stream/tensor_bytes_reader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor/byte_runs.h"
#include "gtest/gtest.h"
#include "integration/formats/safetensors/safetensors.h"
#include "specs/shard_metadata.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

using ::shardkit::testing::IsOk;

constexpr int64_t kStaging = 256 << 10;

// The tensors of a real file, every read asked of it recorded (offset, bytes).
class RecordingSource : public TensorSource {
 public:
  explicit RecordingSource(safetensors::Reader file) : file_(std::move(file)) {}
  const safetensors::Header& header() const override { return file_.header(); }
  const std::vector<CheckpointFile>& identity() const override { return identity_; }
  absl::Status ReadBytes(size_t t, int64_t offset, int64_t size, std::byte* dst) const override {
    reads.emplace_back(offset, size);
    return file_.ReadBytes(file_.header().tensors[t], static_cast<uint64_t>(offset),
                           static_cast<uint64_t>(size), dst);
  }
  absl::Status CheckUnchanged(size_t) const override { return absl::OkStatus(); }
  const void* FilesOf(size_t) const override { return &file_; }

  mutable std::vector<std::pair<int64_t, int64_t>> reads;

 private:
  safetensors::Reader file_;
  std::vector<CheckpointFile> identity_;
};

// Bytes no two alike in any nearby window: byte i of a tensor is a hash of (tensor, i).
Tensor Patterned(const Shape& shape, int salt) {
  Tensor t = *Tensor::Empty(shape, DType::kFloat32);
  for (size_t i = 0; i < static_cast<size_t>(t.nbytes()); ++i) {
    t.data()[i] = static_cast<std::byte>(((i + static_cast<size_t>(salt)) * 2654435761u) >> 13);
  }
  return t;
}

specs::ShardMetadata Cut(Shape offsets, Shape sizes) {
  return {std::move(offsets), std::move(sizes), specs::Placement::ForRank(0)};
}

struct Layout {
  const char* name;
  const char* tensor;  // "wide" [64, 4096], "mid" [256, 1024], "narrow" [512, 8] (F32)
  Shape offsets;
  Shape sizes;
};

class WantTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tensors_ = new std::vector<std::pair<std::string, Tensor>>{{"mid", Patterned({256, 1024}, 1)},
                                                               {"narrow", Patterned({512, 8}, 2)},
                                                               {"wide", Patterned({64, 4096}, 3)}};
    std::vector<std::pair<std::string, const Tensor*>> named;
    for (const auto& [name, tensor] : *tensors_) named.emplace_back(name, &tensor);
    ASSERT_THAT(safetensors::WriteFile(testing::TestPath("want.safetensors"), named), IsOk());
  }
  static void TearDownTestSuite() { delete tensors_; }

  void SetUp() override {
    source_ = std::make_unique<RecordingSource>(
        *safetensors::Reader::Open(testing::TestPath("want.safetensors")));
    staging_.resize(kStaging);
  }

  size_t Index(const std::string& name) const {
    for (size_t t = 0; t < source_->header().tensors.size(); ++t) {
      if (source_->header().tensors[t].name == name) return t;
    }
    ADD_FAILURE() << name;
    return 0;
  }
  const Tensor& Whole(const std::string& name) const {
    for (const auto& [n, tensor] : *tensors_) {
      if (n == name) return tensor;
    }
    return tensors_->front().second;
  }

  static std::vector<std::pair<std::string, Tensor>>* tensors_;
  std::unique_ptr<RecordingSource> source_;
  std::vector<std::byte> staging_;
};

std::vector<std::pair<std::string, Tensor>>* WantTest::tensors_ = nullptr;

// Wanted bytes of `runs` inside tensor bytes [begin, end), and the longest gap between them.
std::pair<int64_t, int64_t> WantedAndLongestGap(const std::vector<ByteRuns>& runs, int64_t begin,
                                                int64_t end) {
  std::vector<const ByteRuns*> all;
  for (const ByteRuns& r : runs) all.push_back(&r);
  int64_t wanted = 0, gap = 0, last = -1;
  ForEachPieceInOrder(all, begin, end, [&](size_t, int64_t at, int64_t, int64_t bytes) {
    if (last >= 0) gap = std::max(gap, at - last);
    last = at + bytes;
    wanted += bytes;
  });
  return {wanted, gap};
}

TEST(JoinsReadTest, TheRule) {
  const CoalescedRead one_column{0, 5461, 5461, 1};
  // A rank's third of 16 KiB rows: the next row's third is 10922 bytes on. Read alone.
  EXPECT_FALSE(JoinsRead(one_column, 16384, 5461, kStaging));
  // Gaps shorter than a page are read through; 4096 bytes only within 1.25 x the wanted bytes.
  EXPECT_TRUE(JoinsRead({0, 100, 100, 1}, 4195, 100, kStaging));
  EXPECT_FALSE(JoinsRead({0, 100, 100, 1}, 4196, 100, kStaging));
  EXPECT_TRUE(JoinsRead({0, 16384, 16384, 1}, 16384 + 4096, 2048, kStaging));  // 22528 <= 23040
  EXPECT_FALSE(JoinsRead({0, 16384, 16384, 1}, 16384 + 5000, 2048, kStaging));
  // Adjacent pieces up to the staging size; a 64 KiB piece is read alone, next or first.
  EXPECT_TRUE(JoinsRead({0, kStaging - 10, kStaging - 10, 9}, kStaging - 10, 10, kStaging));
  EXPECT_FALSE(JoinsRead({0, kStaging - 10, kStaging - 10, 9}, kStaging - 10, 11, kStaging));
  EXPECT_FALSE(JoinsRead({0, 10, 10, 1}, 10, kDirectReadBytes, kStaging));
  EXPECT_FALSE(
      JoinsRead({0, kDirectReadBytes, kDirectReadBytes, 1}, kDirectReadBytes, 10, kStaging));
  EXPECT_FALSE(JoinsRead({}, 0, 10, kStaging));
  EXPECT_FALSE(JoinsRead({0, 10, 10, kMaxPiecesPerRead}, 10, 10, kStaging));
}

// Each layout: the shard's pieces given to Want land byte for byte where its own row-major bytes
// go; every pread holds wanted bytes within 1.25 x, or gaps shorter than a page; and where the
// runs lie a page or more apart, all the preads together are at most 1.25 x the shard.
TEST_F(WantTest, ReadsTheWantedBytesWithinTheRule) {
  const std::vector<Layout> layouts = {
      {"row -> column: a third of 16 KiB rows", "wide", {0, 1366}, {64, 1365}},
      {"a quarter of 16 KiB rows", "wide", {0, 3072}, {64, 1024}},
      {"half of 4 KiB rows (gaps under a page, read through)", "mid", {0, 512}, {256, 512}},
      {"1 KiB of 16 KiB rows", "wide", {0, 100}, {64, 256}},
      {"a block: 12 KB of 16 KiB rows", "wide", {16, 1000}, {32, 3000}},
      {"one whole row (a 16 KiB piece, read alone)", "wide", {3, 0}, {1, 4096}},
      {"whole rows (one 128 KiB piece, straight into place)", "wide", {8, 0}, {8, 4096}},
      {"everything", "mid", {0, 0}, {256, 1024}},
      {"8-byte columns", "narrow", {0, 2}, {512, 2}},
      {"4-byte column, one of 8", "narrow", {100, 7}, {300, 1}},
  };
  for (const Layout& layout : layouts) {
    SCOPED_TRACE(layout.name);
    const size_t t = Index(layout.tensor);
    const safetensors::TensorInfo& info = source_->header().tensors[t];
    const ByteRuns runs = *RunsOf(info.shape, 32, Cut(layout.offsets, layout.sizes));
    std::vector<std::byte> want(static_cast<size_t>(runs.bytes()));
    ForEachPiece(runs, 0, static_cast<int64_t>(info.end - info.begin),
                 [&](int64_t at, int64_t shard_at, int64_t bytes) {
                   std::memcpy(want.data() + shard_at, Whole(layout.tensor).data() + at,
                               static_cast<size_t>(bytes));
                 });
    std::vector<std::byte> got(want.size(), std::byte{0xee});
    TensorBytesReader reader(staging_);
    source_->reads.clear();
    reader.Reset(*source_, t);
    absl::Status status;
    ForEachPiece(runs, 0, static_cast<int64_t>(info.end - info.begin),
                 [&](int64_t at, int64_t shard_at, int64_t bytes) {
                   if (status.ok()) status = reader.Want(at, bytes, got.data() + shard_at);
                 });
    ASSERT_THAT(status, IsOk());
    ASSERT_THAT(reader.Flush(), IsOk());
    EXPECT_TRUE(got == want) << "bytes differ";
    int64_t read = 0;
    for (const auto& [at, bytes] : source_->reads) {
      read += bytes;
      const auto [wanted, gap] = WantedAndLongestGap({runs}, at, at + bytes);
      EXPECT_TRUE(bytes <= kStaging || wanted == bytes) << "only a piece alone exceeds staging";
      EXPECT_TRUE(bytes * 4 <= wanted * 5 || gap < kPageBytes)
          << "read [" << at << ", " << at + bytes << "): " << wanted << " bytes wanted, gaps up to "
          << gap;
    }
    EXPECT_EQ(read, reader.bytes_read());
    if (runs.count < 2 || runs.outer_strides.back() - runs.length >= kPageBytes) {
      EXPECT_LE(read * 4, runs.bytes() * 5) << read << " bytes read for " << runs.bytes();
    }
  }
}

TEST_F(WantTest, ColumnsOfRowsAreReadOnePreadEachExactly) {
  // The reshard row -> column case: 64 rows of 16 KiB, this rank's 5460 bytes of each.
  const size_t t = Index("wide");
  const ByteRuns runs = *RunsOf({64, 4096}, 32, Cut({0, 1366}, {64, 1365}));
  std::vector<std::byte> got(static_cast<size_t>(runs.bytes()));
  TensorBytesReader reader(staging_);
  reader.Reset(*source_, t);
  ForEachPiece(runs, 0, 64 * 16384, [&](int64_t at, int64_t shard_at, int64_t bytes) {
    ASSERT_THAT(reader.Want(at, bytes, got.data() + shard_at), IsOk());
  });
  ASSERT_THAT(reader.Flush(), IsOk());
  EXPECT_EQ(source_->reads.size(), 64u);
  EXPECT_EQ(reader.bytes_read(), runs.bytes());
}

TEST_F(WantTest, EveryShardsPiecesTogetherAreReadInStagingSizedPreads) {
  // What a scatter source reads: all three column shards, pieces interleaved in tensor order.
  const size_t t = Index("wide");
  const Shape shape = {64, 4096};
  const std::vector<ByteRuns> runs = {*RunsOf(shape, 32, Cut({0, 0}, {64, 1366})),
                                      *RunsOf(shape, 32, Cut({0, 1366}, {64, 1365})),
                                      *RunsOf(shape, 32, Cut({0, 2731}, {64, 1365}))};
  std::vector<const ByteRuns*> all;
  for (const ByteRuns& r : runs) all.push_back(&r);
  std::vector<std::vector<std::byte>> got;
  for (const ByteRuns& r : runs) got.emplace_back(static_cast<size_t>(r.bytes()));
  TensorBytesReader reader(staging_);
  reader.Reset(*source_, t);
  ForEachPieceInOrder(all, 0, 64 * 16384,
                      [&](size_t i, int64_t at, int64_t shard_at, int64_t bytes) {
                        ASSERT_THAT(reader.Want(at, bytes, got[i].data() + shard_at), IsOk());
                      });
  ASSERT_THAT(reader.Flush(), IsOk());
  EXPECT_EQ(reader.bytes_read(), 64 * 16384);
  EXPECT_EQ(source_->reads.size(), static_cast<size_t>(64 * 16384 / kStaging));
  for (size_t i = 0; i < runs.size(); ++i) {
    ForEachPiece(runs[i], 0, 64 * 16384, [&](int64_t at, int64_t shard_at, int64_t bytes) {
      EXPECT_EQ(std::memcmp(got[i].data() + shard_at, Whole("wide").data() + at,
                            static_cast<size_t>(bytes)),
                0)
          << "shard " << i << " at " << at;
    });
  }
}

}  // namespace
}  // namespace shardkit::checkpoint
