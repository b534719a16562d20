// The Hugging Face checkpoint through the writer interface (HfOutput as a formats::OutputWriter),
// in one process, on real files: written as gather writes it (one rank file's sink, bytes in
// order, then the last file), read back with the index reader and safetensors' reader.
#include "integration/formats/hf/hf_writer.h"

#include <cstddef>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/tensor/shape.h"
#include "integration/formats/hf/hf_index.h"
#include "integration/formats/safetensors/safetensors.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::hf {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::IsOk;

formats::OutputTensor Whole(std::string name, DType dtype, Shape shape) {
  return {std::move(name), dtype, std::move(shape), /*replicated=*/true, {}, "null"};
}

// a: 8 bytes, b: 12, c: 4, d: 20 (F32), under 16 bytes a file: {a}, {b, c}, {d} (d alone: larger).
std::vector<formats::OutputTensor> Example() {
  return {Whole("a", DType::kFloat32, {2}), Whole("b", DType::kFloat32, {3}),
          Whole("c", DType::kInt8, {2, 2}), Whole("d", DType::kFloat32, {5})};
}

std::string TensorBytes(size_t t, const formats::OutputTensor& tensor) {
  std::string bytes(static_cast<size_t>(ComputeShapeSize(tensor.shape, tensor.dtype)->nbytes), 0);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(t * 31 + i + 1);
  return bytes;
}

// Writes `tensors` into `dir` as gather does: the bytes in the order of their offsets.
void WriteCheckpoint(const HfOutput& writer, const std::string& dir,
                     const formats::OutputContent& content,
                     const std::vector<formats::OutputTensor>& tensors) {
  formats::RankFile file;
  ASSERT_THAT(writer.CreateRankFile(dir, 0, content, file), IsOk());
  ASSERT_TRUE(file.sink->writes_in_order());
  std::map<int64_t, size_t> by_offset;
  for (size_t t = 0; t < tensors.size(); ++t) by_offset[file.data_start + file.dest[t][0]] = t;
  for (const auto& [offset, t] : by_offset) {
    const std::string bytes = TensorBytes(t, tensors[t]);
    ASSERT_THAT(file.sink->WriteAt(static_cast<uint64_t>(offset), bytes.data(), bytes.size()),
                IsOk());
  }
  ASSERT_THAT(file.sink->Commit(), IsOk());
  ASSERT_THAT(writer.WriteLastFile(dir, content), IsOk());
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

TEST(HfWriterTest, SeveralFilesReadBackThroughTheirIndex) {
  const std::string dir = testing::FreshTestDir("hf_writer_several");
  const std::vector<formats::OutputTensor> tensors = Example();
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  const formats::OutputContent content{
      .world_size = 1, .tensors = tensors, .written_by = "gather", .metadata = &metadata};
  const HfOutput writer(16);
  const std::vector<std::string> files = writer.RankFileNames(0, content);
  ASSERT_EQ(files, (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                             "model-00002-of-00003.safetensors",
                                             "model-00003-of-00003.safetensors"}));
  EXPECT_EQ(writer.RankFileTensors(content), std::vector<int64_t>{4});
  WriteCheckpoint(writer, dir, content, tensors);
  std::set<std::string> want(files.begin(), files.end());
  want.insert(kHfIndexFileName);
  EXPECT_EQ(Names(dir), want);

  const std::string index = dir + "/" + kHfIndexFileName;
  absl::StatusOr<HfIndex> map = ReadHfIndex(index);
  ASSERT_THAT(map.status(), IsOk());
  EXPECT_EQ(map->total_size, 44);
  EXPECT_EQ(map->file_of, (std::map<std::string, std::string>{
                              {"a", files[0]}, {"b", files[1]}, {"c", files[1]}, {"d", files[2]}}));
  std::vector<std::string> names, paths;
  absl::StatusOr<std::vector<safetensors::Reader>> readers =
      OpenHfIndexFiles(index, *map, names, paths);
  ASSERT_THAT(readers.status(), IsOk());
  ASSERT_THAT(CheckHfIndex(index, *map, names, *readers), IsOk());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t f = static_cast<size_t>(
        std::find(names.begin(), names.end(), map->file_of.at(tensors[t].name)) - names.begin());
    const safetensors::Reader& reader = (*readers)[f];
    EXPECT_EQ(reader.header().metadata, metadata) << names[f];
    absl::StatusOr<const safetensors::TensorInfo*> info = reader.Find(tensors[t].name);
    ASSERT_THAT(info.status(), IsOk());
    std::string bytes((*info)->end - (*info)->begin, 0);
    ASSERT_THAT(
        reader.ReadBytes(**info, 0, bytes.size(), reinterpret_cast<std::byte*>(bytes.data())),
        IsOk());
    EXPECT_EQ(bytes, TensorBytes(t, tensors[t])) << tensors[t].name;
  }
}

// Everything in one file: model.safetensors alone, and WriteLastFile writes no index.
TEST(HfWriterTest, OneFileIsModelSafetensorsWithoutAnIndex) {
  const std::string dir = testing::FreshTestDir("hf_writer_one");
  const std::vector<formats::OutputTensor> tensors = Example();
  const formats::OutputContent content{.world_size = 1, .tensors = tensors};
  const HfOutput writer(1 << 20);
  EXPECT_EQ(writer.RankFileNames(0, content), std::vector<std::string>{kHfSingleFileName});
  WriteCheckpoint(writer, dir, content, tensors);
  EXPECT_EQ(Names(dir), std::set<std::string>{kHfSingleFileName});
  absl::StatusOr<safetensors::Reader> reader =
      safetensors::Reader::Open(dir + "/" + kHfSingleFileName);
  ASSERT_THAT(reader.status(), IsOk());
  EXPECT_EQ(reader->header().tensors.size(), 4u);
}

// What a Hugging Face checkpoint cannot be is refused before any file is created, naming it.
TEST(HfWriterTest, RefusesWhatOneProcessCannotWriteInNameOrder) {
  const std::string dir = testing::FreshTestDir("hf_writer_refused");
  const HfOutput writer(16);
  const auto refused = [&](const formats::OutputContent& content, int rank) {
    formats::RankFile file;
    const absl::Status status = writer.CreateRankFile(dir, rank, content, file);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(file.sink, nullptr);
    EXPECT_TRUE(fs::is_empty(dir));
    return std::string(status.message());
  };
  const std::vector<formats::OutputTensor> tensors = Example();
  EXPECT_EQ(refused({.world_size = 2, .tensors = tensors}, 1),
            "a Hugging Face checkpoint is written by one process, not by rank 1 of 2");
  std::vector<formats::OutputTensor> sharded = Example();
  sharded[2].replicated = false;
  EXPECT_EQ(refused({.world_size = 1, .tensors = sharded}, 0),
            "tensor \"c\" is sharded: a Hugging Face checkpoint holds whole tensors");
  std::vector<formats::OutputTensor> unsorted = Example();
  std::swap(unsorted[1], unsorted[2]);
  EXPECT_EQ(refused({.world_size = 1, .tensors = unsorted}, 0),
            "tensors \"c\" and \"b\" are not in name order: a Hugging Face checkpoint's files are "
            "planned in name order");
}

// Its directory rule: an earlier Hugging Face output is never replaced.
TEST(HfWriterTest, ExamineRefusesAnyOutputOfIt) {
  const HfOutput writer(16);
  EXPECT_TRUE(writer.IsOutputFile("model.safetensors"));
  EXPECT_TRUE(writer.IsOutputFile("model-00002-of-00003.safetensors"));
  EXPECT_TRUE(writer.IsOutputFile(kHfIndexFileName));
  EXPECT_FALSE(writer.IsOutputFile("config.json"));
  EXPECT_EQ(writer.last_file_name(), kHfIndexFileName);
  absl::StatusOr<bool> none = writer.Examine("out", {});
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_FALSE(*none);
  absl::StatusOr<bool> some =
      writer.Examine("out", {"model.safetensors.index.json", "model-00001-of-00002.safetensors"});
  EXPECT_EQ(some.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(some.status().message(),
            "out: holds the files of a Hugging Face checkpoint "
            "(model-00001-of-00002.safetensors, model.safetensors.index.json): a Hugging Face "
            "output is written into an empty directory, never over an earlier one");
}

}  // namespace
}  // namespace shardkit::hf
