#include "integration/formats/dcp/metadata_writer.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/formats/dcp/metadata.h"
#include "testing/status_matchers.h"

namespace shardkit::dcp {
namespace {

using ::testing::ElementsAre;

// Items at offsets that take every int opcode: BININT1, BININT2, BININT and LONG1.
Metadata Sample() {
  Metadata m;
  m.tensors.push_back({.fqn = "b", .dtype = DType::kBFloat16, .shape = {}, .chunks = {}});
  m.tensors.back().chunks.push_back({.offsets = {}, .sizes = {}, .item = {"__0_0.distcp", 0, 200}});
  m.tensors.push_back({.fqn = "e", .dtype = DType::kFloat8E4M3, .shape = {0, 3}, .chunks = {}});
  m.tensors.back().chunks.push_back(
      {.offsets = {0, 0}, .sizes = {0, 3}, .item = {"__0_0.distcp", 200, 40000}});
  m.tensors.push_back({.fqn = "opt.state.w.exp_avg", .dtype = DType::kInt64, .shape = {5, 3}});
  m.tensors.back().chunks.push_back(
      {.offsets = {0, 0}, .sizes = {2, 3}, .item = {"__0_0.distcp", 40200, 3000000000}});
  m.tensors.back().chunks.push_back(
      {.offsets = {2, 0}, .sizes = {3, 3}, .item = {"__1_0.distcp", uint64_t{1} << 40, 1500}});
  m.tensors.push_back({.fqn = "w", .dtype = DType::kFloat32, .shape = {4, 6}, .chunks = {}});
  m.tensors.back().chunks.push_back(
      {.offsets = {0, 0}, .sizes = {4, 6}, .item = {"__1_0.distcp", 0, 1577}});
  m.planner_data["opt.state.w.exp_avg"] = {"opt", "state", "w", "exp_avg"};
  m.planner_data["b"] = {"blocks", int64_t{0}, "b"};
  m.bytes.push_back({"opt.param_groups.0.lr", {"__1_0.distcp", 1577, 700}});
  m.bytes.push_back({"step", {"__0_0.distcp", 3000040200, 9}});
  m.planner_data["opt.param_groups.0.lr"] = {"opt", "param_groups", int64_t{0}, "lr"};
  return m;
}

void ExpectSameTensors(const std::vector<TensorEntry>& got, const std::vector<TensorEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < want.size(); ++t) {
    SCOPED_TRACE(want[t].fqn);
    EXPECT_EQ(got[t].fqn, want[t].fqn);
    EXPECT_EQ(got[t].dtype, want[t].dtype);
    EXPECT_EQ(got[t].shape, want[t].shape);
    ASSERT_EQ(got[t].chunks.size(), want[t].chunks.size());
    for (size_t c = 0; c < want[t].chunks.size(); ++c) {
      const Chunk& g = got[t].chunks[c];
      const Chunk& w = want[t].chunks[c];
      EXPECT_EQ(g.offsets, w.offsets);
      EXPECT_EQ(g.sizes, w.sizes);
      EXPECT_EQ(g.item.file, w.item.file);
      EXPECT_EQ(g.item.offset, w.item.offset);
      EXPECT_EQ(g.item.length, w.item.length);
    }
  }
}

TEST(MetadataWriterTest, ParseMetadataReadsBackWhatWasWritten) {
  const Metadata sample = Sample();
  absl::StatusOr<Metadata> read = ParseMetadata(SerializeMetadata(sample), "written/.metadata");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameTensors(read->tensors, sample.tensors);
  ASSERT_EQ(read->bytes.size(), 2u);  // the non-tensor items, each where its bytes are
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(read->bytes[i].fqn, sample.bytes[i].fqn);
    EXPECT_EQ(read->bytes[i].item.file, sample.bytes[i].item.file);
    EXPECT_EQ(read->bytes[i].item.offset, sample.bytes[i].item.offset);
    EXPECT_EQ(read->bytes[i].item.length, sample.bytes[i].item.length);
  }
  EXPECT_EQ(read->version, "1.0.0");
  // The recorded paths, and (fqn,) for the others.
  ASSERT_EQ(read->planner_data.size(), 6u);
  EXPECT_EQ(read->planner_data["opt.param_groups.0.lr"],
            sample.planner_data.at("opt.param_groups.0.lr"));
  EXPECT_THAT(read->planner_data["step"], ElementsAre(PathStep("step")));
  EXPECT_EQ(read->planner_data["opt.state.w.exp_avg"],
            sample.planner_data.at("opt.state.w.exp_avg"));
  EXPECT_EQ(read->planner_data["b"], sample.planner_data.at("b"));
  EXPECT_THAT(read->planner_data["w"], ElementsAre(PathStep("w")));
  EXPECT_THAT(read->planner_data["e"], ElementsAre(PathStep("e")));
}

TEST(MetadataWriterTest, SameInputSameBytes) {
  EXPECT_EQ(SerializeMetadata(Sample()), SerializeMetadata(Sample()));
  Metadata moved = Sample();
  moved.tensors[3].chunks[0].item.offset = 1;
  EXPECT_NE(SerializeMetadata(moved), SerializeMetadata(Sample()));
}

// More than 256 memo entries (LONG_BINPUT / LONG_BINGET) and many files.
TEST(MetadataWriterTest, ManyChunks) {
  Metadata m;
  TensorEntry tensor{.fqn = "rows", .dtype = DType::kFloat16, .shape = {1000, 2}, .chunks = {}};
  for (int64_t i = 0; i < 1000; ++i) {
    tensor.chunks.push_back({.offsets = {i, 0},
                             .sizes = {1, 2},
                             .item = {absl::StrCat("__", i % 300, "_0.distcp"),
                                      static_cast<uint64_t>(i / 300) * 1513, 1513}});
  }
  m.tensors.push_back(tensor);
  absl::StatusOr<Metadata> read = ParseMetadata(SerializeMetadata(m), "many");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameTensors(read->tensors, m.tensors);
}

}  // namespace
}  // namespace shardkit::dcp
