// Both output formats through the one writer interface (formats::OutputWriter, picked by
// OutputWriterOf), in one process: every rank's file created, its tensors' bytes written where the
// writer says, committed, then the last file; read back with each format's own readers.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/os/fd.h"
#include "core/os/files.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/torch_zip/torch_zip.h"
#include "specs/parameter_layout.h"
#include "specs/spec_json.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

constexpr int kWorld = 2;

// A tensor of the example with its layout: sharded along dim 0 by `spec_json`, or replicated.
formats::OutputTensor LaidOut(std::string name, DType dtype, Shape shape,
                              std::string_view spec_json) {
  std::optional<specs::ShardingSpec> spec;
  if (spec_json != specs::kReplicatedJson) spec = *specs::ParseSpec(spec_json);
  const specs::ParameterLayout layout = *specs::LayOutParameter(spec, shape, kWorld);
  formats::OutputTensor tensor{std::move(name), dtype, std::move(shape), !spec, {}, {}};
  if (spec) tensor.shards = layout.shards;
  tensor.spec_json = layout.canonical_json;
  return tensor;
}

// "a": rows over ranks 1, 0; "b": replicated; "c": one row over ranks 0, 1 (rank 1's is empty).
std::vector<formats::OutputTensor> ExampleTensors() {
  return {LaidOut("a", DType::kFloat32, {4, 2},
                  R"({"type":"chunk","dim":0,"placements":["rank:1","rank:0"]})"),
          LaidOut("b", DType::kFloat32, {3}, specs::kReplicatedJson),
          LaidOut("c", DType::kInt8, {1, 2},
                  R"({"type":"chunk","dim":0,"placements":["rank:0","rank:1"]})")};
}

int64_t RowBytes(const formats::OutputTensor& tensor) {
  int64_t bytes = static_cast<int64_t>(ElementSize(tensor.dtype));
  for (size_t d = 1; d < tensor.shape.size(); ++d) bytes *= tensor.shape[d];
  return bytes;
}

// Byte i of tensor t's row-major values.
std::byte ValueByte(size_t t, int64_t i) { return std::byte((t * 67 + i * 5 + 1) & 0xff); }

// The bytes of shard s of tensor t (s = -1: the whole tensor): rows, as every layout here is.
std::string ShardBytes(const std::vector<formats::OutputTensor>& tensors, size_t t, int64_t s) {
  const formats::OutputTensor& tensor = tensors[t];
  int64_t first_row = 0, rows = tensor.shape[0];
  if (s >= 0) {
    first_row = tensor.shards[static_cast<size_t>(s)].offsets[0];
    rows = tensor.shards[static_cast<size_t>(s)].sizes[0];
  }
  std::string bytes;
  for (int64_t i = first_row * RowBytes(tensor); i < (first_row + rows) * RowBytes(tensor); ++i) {
    bytes.push_back(static_cast<char>(ValueByte(t, i)));
  }
  return bytes;
}

// Every rank writes its file through `writer` as the checkpoint writers do; the source writes the
// last file. Returns each rank's RankFileTensors.
std::vector<int64_t> WriteOutput(const formats::OutputWriter& writer, const std::string& dir,
                                 const formats::OutputContent& content,
                                 const std::vector<formats::OutputTensor>& tensors) {
  for (int rank = 0; rank < kWorld; ++rank) {
    formats::RankFile file;
    SHARDKIT_EXPECT_OK(writer.CreateRankFile(dir, rank, content, file));
    for (size_t t = 0; t < tensors.size(); ++t) {
      for (size_t s = 0; s < file.dest[t].size(); ++s) {
        if (file.dest[t][s] < 0) continue;
        const std::string bytes =
            ShardBytes(tensors, t, tensors[t].replicated ? -1 : static_cast<int64_t>(s));
        SHARDKIT_EXPECT_OK(file.sink->WriteAt(
            static_cast<uint64_t>(file.data_start + file.dest[t][s]), bytes.data(), bytes.size()));
      }
    }
    SHARDKIT_EXPECT_OK(file.sink->Commit());
  }
  SHARDKIT_EXPECT_OK(writer.WriteLastFile(dir, content));
  return writer.RankFileTensors(content);
}

TEST(OutputWriterTest, ShardDirectoryReadsBackAsTheIndexAndRankFilesOfTheLayouts) {
  const std::string dir = testing::FreshTestDir("output_writer");
  const std::vector<formats::OutputTensor> tensors = ExampleTensors();
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  const formats::OutputContent content{.world_size = kWorld,
                                       .src_rank = 0,
                                       .tensors = tensors,
                                       .written_by = "save",
                                       .metadata = &metadata};
  const formats::OutputWriter& writer = OutputWriterOf(OutputFormat::kShardkit);
  // Rank 0: a's second shard, b, c's first; rank 1: a's first, b, c's empty one.
  EXPECT_THAT(WriteOutput(writer, dir, content, tensors), ElementsAre(3, 3));
  EXPECT_EQ(writer.RankFileName(1), "rank-00001.safetensors");

  // index.json is the index of these layouts, byte for byte.
  ShardIndex expected{kWorld, 0, WrittenBy::kSave, metadata, {}};
  for (const formats::OutputTensor& tensor : tensors) {
    std::optional<specs::ShardingSpec> spec;
    if (!tensor.replicated) spec = *specs::ParseSpec(tensor.spec_json);
    expected.parameters.push_back(
        MakeIndexParameter(tensor.name, tensor.dtype, tensor.shape,
                           *specs::LayOutParameter(spec, tensor.shape, kWorld)));
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const std::string text,
                                os::ReadWholeFile((fs::path(dir) / kIndexFileName).string()));
  EXPECT_EQ(text, IndexToJson(expected));

  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardIndex index, ReadIndex(dir));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const std::vector<safetensors::Reader> files,
                                OpenRankFiles(dir, index));
  SHARDKIT_EXPECT_OK(VerifyShards(files, index));
  for (size_t t = 0; t < tensors.size(); ++t) {
    const IndexParameter& parameter = index.parameters[t];  // a, b, c: name order
    for (size_t s = 0; s < parameter.shards.size(); ++s) {
      const int rank = static_cast<int>(parameter.shards[s].metadata.placement.rank());
      SHARDKIT_ASSERT_OK_AND_ASSIGN(
          const shardkit::Tensor read,
          files[static_cast<size_t>(rank)].ReadTensor(parameter.shards[s].tensor));
      SHARDKIT_ASSERT_OK_AND_ASSIGN(const std::span<std::byte> bytes, read.Bytes());
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                ShardBytes(tensors, t, tensors[t].replicated ? -1 : static_cast<int64_t>(s)))
          << parameter.name << " shard " << s;
    }
  }
}

TEST(OutputWriterTest, DcpCheckpointReadsBackAsTheChunksAndItemsOfTheLayouts) {
  const std::string dir = testing::FreshTestDir("output_writer");
  const std::vector<formats::OutputTensor> tensors = ExampleTensors();
  const std::map<std::string, std::string> metadata;
  const formats::OutputItems items{.bytes = {{"step", "xyz"}}, .paths = {{"step", {"step"}}}};
  const formats::OutputContent content{.world_size = kWorld,
                                       .src_rank = 0,
                                       .tensors = tensors,
                                       .written_by = "save",
                                       .metadata = &metadata,
                                       .items = &items};
  const formats::OutputWriter& writer = OutputWriterOf(OutputFormat::kDcp);
  ASSERT_TRUE(writer.holds_items());
  // The source: a's second shard, b whole, c's first shard; rank 1: a's first (c's is empty).
  EXPECT_THAT(WriteOutput(writer, dir, content, tensors), ElementsAre(3, 1));

  SHARDKIT_ASSERT_OK_AND_ASSIGN(const dcp::Metadata read, dcp::ReadMetadata(dir));
  ASSERT_EQ(read.tensors.size(), 3u);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const dcp::TensorEntry& entry = read.tensors[t];
    EXPECT_EQ(entry.fqn, tensors[t].name);
    EXPECT_EQ(entry.shape, tensors[t].shape);
    for (const dcp::Chunk& chunk : entry.chunks) {
      const std::string path = (fs::path(dir) / chunk.item.file).string();
      const os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      ASSERT_TRUE(fd.valid()) << path;
      SHARDKIT_ASSERT_OK_AND_ASSIGN(
          const torch_zip::TensorRecord record,
          torch_zip::ReadTensorRecord(fd.get(), fs::file_size(path), chunk.item.offset,
                                      chunk.item.length, path));
      EXPECT_EQ(record.shape, chunk.sizes);
      std::string values(record.data_length, '\0');
      ASSERT_EQ(
          ::pread(fd.get(), values.data(), values.size(), static_cast<off_t>(record.data_offset)),
          static_cast<ssize_t>(values.size()));
      int64_t shard = -1;  // the chunk's shard: the one at its offsets
      for (size_t s = 0; s < tensors[t].shards.size(); ++s) {
        if (tensors[t].shards[s].offsets == chunk.offsets) shard = static_cast<int64_t>(s);
      }
      EXPECT_EQ(values, ShardBytes(tensors, t, shard)) << entry.fqn;
    }
  }
  EXPECT_EQ(read.tensors[0].chunks.size(), 2u);
  EXPECT_EQ(read.tensors[1].chunks.size(), 1u);  // replicated: once, by the source
  EXPECT_EQ(read.tensors[2].chunks.size(), 1u);  // the empty shard holds no archive
  ASSERT_EQ(read.bytes.size(), 1u);
  EXPECT_EQ(read.bytes[0].fqn, "step");
  EXPECT_EQ(read.bytes[0].item.file, writer.RankFileName(0));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      const std::string source,
      os::ReadWholeFile((fs::path(dir) / writer.RankFileName(0)).string()));
  EXPECT_EQ(source.substr(read.bytes[0].item.offset, read.bytes[0].item.length), "xyz");
  EXPECT_EQ(read.planner_data.at("step"), std::vector<dcp::PathStep>{std::string("step")});
}

}  // namespace
}  // namespace shardkit::checkpoint
