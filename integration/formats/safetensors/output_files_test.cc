#include "integration/formats/safetensors/output_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/os/files.h"
#include "integration/formats/safetensors/safetensors.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::safetensors {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::IsOk;

// a (5 bytes) and d (3) in file 0, b (no bytes) alone in file 1, c (7) in file 2: file 1 has no
// data, so the virtual region is file 0's [0, 8), then file 2's [8, 15).
struct Example {
  std::vector<TensorInfo> tensors = {{"a", DType::kUInt8, {5}, 0, 0},
                                     {"b", DType::kUInt8, {0}, 0, 0},
                                     {"c", DType::kUInt8, {7}, 0, 0},
                                     {"d", DType::kUInt8, {3}, 0, 0}};
  std::vector<size_t> file_of = {0, 1, 2, 0};
  std::vector<std::string> paths;
  std::vector<TensorInfo> placed;

  explicit Example(const std::string& dir) {
    for (const char* name : {"f0.safetensors", "f1.safetensors", "f2.safetensors"}) {
      paths.push_back(dir + "/" + name);
    }
  }
  absl::StatusOr<std::vector<OutputFile>> Plan() {
    return PlanOutputFiles(tensors, file_of, paths, {{"format", "pt"}}, &placed);
  }
  // The planned files, opened (the first one created).
  absl::StatusOr<OutputFiles> Open() {
    absl::StatusOr<std::vector<OutputFile>> files = Plan();
    if (!files.ok()) return files.status();
    OutputFiles out(*std::move(files));
    if (absl::Status s = out.Open(); !s.ok()) return s;
    return out;
  }
};

std::vector<std::byte> TensorBytes(const std::string& path, const std::string& name) {
  absl::StatusOr<safetensors::Reader> reader = safetensors::Reader::Open(path);
  EXPECT_THAT(reader.status(), IsOk());
  EXPECT_EQ(reader->header().metadata.at("format"), "pt") << path;
  absl::StatusOr<const TensorInfo*> info = reader->Find(name);
  EXPECT_THAT(info.status(), IsOk()) << path << " " << name;
  std::vector<std::byte> bytes((*info)->end - (*info)->begin);
  EXPECT_THAT(reader->ReadBytes(**info, 0, bytes.size(), bytes.data()), IsOk());
  return bytes;
}

std::vector<std::byte> Range(int begin, int end) {
  std::vector<std::byte> bytes;
  for (int i = begin; i < end; ++i) bytes.push_back(static_cast<std::byte>(i));
  return bytes;
}

TEST(PlanOutputFilesTest, FilesFollowEachOtherInTheVirtualRegion) {
  Example example(testing::FreshTestDir("plan"));
  absl::StatusOr<std::vector<OutputFile>> files = example.Plan();
  ASSERT_THAT(files.status(), IsOk());
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].begin, 0u);
  EXPECT_EQ((*files)[1].begin, 8u);
  EXPECT_EQ((*files)[2].begin, 8u);
  EXPECT_EQ((*files)[2].end(), 15u);
  std::vector<std::pair<uint64_t, uint64_t>> offsets;
  for (const TensorInfo& info : example.placed) offsets.emplace_back(info.begin, info.end);
  EXPECT_EQ(offsets, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 5}, {8, 8}, {8, 15}, {5, 8}}));
}

// The names in `dir` that are temporary files, and those that are not.
std::pair<int, int> TemporaryAndFinal(const std::string& dir) {
  std::pair<int, int> counts;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    ++(entry.path().filename().string().find(".tmp.") != std::string::npos ? counts.first
                                                                           : counts.second);
  }
  return counts;
}

TEST(OutputFilesTest, WritesAcrossFilesAndCommitsAtTheEnd) {
  const std::string dir = testing::FreshTestDir("write");
  Example example(dir);
  absl::StatusOr<OutputFiles> opened = example.Open();
  ASSERT_THAT(opened.status(), IsOk());
  OutputFiles& out = *opened;
  const std::vector<std::byte> data = Range(0, 15);
  for (size_t at = 0; at < data.size(); at += 4) {  // pieces cross the files' boundaries
    const size_t n = std::min<size_t>(4, data.size() - at);
    ASSERT_THAT(out.WriteAt(at, data.data() + at, n), IsOk());
  }
  EXPECT_EQ(TemporaryAndFinal(dir), std::make_pair(3, 0));  // complete, none committed yet
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_EQ(TemporaryAndFinal(dir), std::make_pair(0, 3));
  EXPECT_EQ(TensorBytes(example.paths[0], "a"), Range(0, 5));
  EXPECT_EQ(TensorBytes(example.paths[0], "d"), Range(5, 8));
  EXPECT_EQ(TensorBytes(example.paths[1], "b"), Range(0, 0));
  EXPECT_EQ(TensorBytes(example.paths[2], "c"), Range(8, 15));
}

// Complete files beyond kMaxUncommittedFiles are committed oldest first while the stream goes on.
TEST(OutputFilesTest, CommitsTheOldestBeyondTheLimit) {
  const std::string dir = testing::FreshTestDir("many");
  Example example(dir);
  const size_t count = kMaxUncommittedFiles + 4;
  example.tensors.clear();
  example.file_of.clear();
  example.paths.clear();
  for (size_t i = 0; i < count; ++i) {
    example.tensors.push_back({absl::StrFormat("t%03d", i), DType::kUInt8, {1}, 0, 0});
    example.file_of.push_back(i);
    example.paths.push_back(absl::StrFormat("%s/f%03d.safetensors", dir, i));
  }
  absl::StatusOr<OutputFiles> opened = example.Open();
  ASSERT_THAT(opened.status(), IsOk());
  OutputFiles& out = *opened;
  const std::vector<std::byte> data = Range(0, static_cast<int>(count));
  ASSERT_THAT(out.WriteAt(0, data.data(), data.size()), IsOk());
  EXPECT_EQ(TemporaryAndFinal(dir), std::make_pair(static_cast<int>(kMaxUncommittedFiles), 4));
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(fs::exists(example.paths[i])) << i;
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_EQ(TemporaryAndFinal(dir), std::make_pair(0, static_cast<int>(count)));
  EXPECT_EQ(TensorBytes(example.paths[count - 1], absl::StrFormat("t%03d", count - 1)),
            Range(static_cast<int>(count) - 1, static_cast<int>(count)));
}

TEST(OutputFilesTest, CommitCreatesFilesWithNoData) {
  Example example(testing::FreshTestDir("empty"));
  example.tensors = {{"a", DType::kUInt8, {0}, 0, 0}, {"b", DType::kUInt8, {0}, 0, 0}};
  example.file_of = {1, 0};
  example.paths.pop_back();
  absl::StatusOr<std::vector<OutputFile>> files = example.Plan();
  ASSERT_THAT(files.status(), IsOk());
  OutputFiles out(*std::move(files));
  EXPECT_EQ(out.total_bytes(), 0u);
  ASSERT_THAT(out.Open(), IsOk());
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_EQ(TensorBytes(example.paths[0], "b"), Range(0, 0));
  EXPECT_EQ(TensorBytes(example.paths[1], "a"), Range(0, 0));
}

TEST(OutputFilesTest, RemoveCommittedLeavesNothing) {
  const std::string dir = testing::FreshTestDir("remove");
  Example example(dir);
  absl::StatusOr<OutputFiles> opened = example.Open();
  ASSERT_THAT(opened.status(), IsOk());
  OutputFiles& out = *opened;
  const std::vector<std::byte> data = Range(0, 10);
  ASSERT_THAT(out.WriteAt(0, data.data(), data.size()), IsOk());  // file 0 and 1 done, 2 open
  EXPECT_EQ(TemporaryAndFinal(dir), std::make_pair(3, 0));
  out.RemoveCommitted();
  EXPECT_TRUE(fs::is_empty(dir));
}

// What a run whose index cannot be written does after Commit.
TEST(OutputFilesTest, RemoveCommittedAfterCommitRemovesTheFiles) {
  const std::string dir = testing::FreshTestDir("remove-committed");
  Example example(dir);
  absl::StatusOr<OutputFiles> opened = example.Open();
  ASSERT_THAT(opened.status(), IsOk());
  OutputFiles& out = *opened;
  const std::vector<std::byte> data = Range(0, 15);
  ASSERT_THAT(out.WriteAt(0, data.data(), data.size()), IsOk());
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_EQ(TemporaryAndFinal(dir), std::make_pair(0, 3));
  out.RemoveCommitted();
  EXPECT_TRUE(fs::is_empty(dir));
}

// As a formats::RankSink: its writes come in order, so one elsewhere is refused, naming both
// offsets, and nothing is written.
TEST(OutputFilesTest, RefusesAWriteOutOfOrder) {
  const std::string dir = testing::FreshTestDir("order");
  Example example(dir);
  absl::StatusOr<OutputFiles> opened = example.Open();
  ASSERT_THAT(opened.status(), IsOk());
  formats::RankSink& sink = *opened;
  EXPECT_TRUE(sink.writes_in_order());
  const std::vector<std::byte> data = Range(0, 15);
  ASSERT_THAT(sink.WriteAt(0, data.data(), 4), IsOk());
  const absl::Status skipped = sink.WriteAt(6, data.data() + 6, 2);
  EXPECT_EQ(skipped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(skipped.message().find("virtual byte 6 where the last one ended at 4"),
            std::string::npos)
      << skipped;
  EXPECT_EQ(sink.WriteAt(0, data.data(), 4).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_THAT(sink.WriteAt(4, data.data() + 4, 11), IsOk());
  ASSERT_THAT(sink.Commit(), IsOk());
  EXPECT_EQ(TensorBytes(example.paths[0], "a"), Range(0, 5));
  EXPECT_EQ(TensorBytes(example.paths[2], "c"), Range(8, 15));
}

// CopyFrom puts a file's bytes across the output files as WriteAt puts memory's.
TEST(OutputFilesTest, CopiesFromAFileAcrossFiles) {
  const std::string dir = testing::FreshTestDir("copy");
  const std::string input = dir + "/input.bin";
  const std::vector<std::byte> data = Range(0, 20);
  ASSERT_THAT(os::WriteFileAtomically(
                  input, std::string(reinterpret_cast<const char*>(data.data()), data.size())),
              IsOk());
  Example example(dir);
  absl::StatusOr<OutputFiles> opened = example.Open();
  ASSERT_THAT(opened.status(), IsOk());
  const int fd = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  // Input bytes [3, 18) become the virtual region [0, 15): a 7-byte piece crosses file 0's end.
  EXPECT_THAT(opened->CopyFrom(fd, input, 3, 0, 7), IsOk());
  EXPECT_THAT(opened->CopyFrom(fd, input, 10, 7, 8), IsOk());
  ::close(fd);
  ASSERT_THAT(opened->Commit(), IsOk());
  EXPECT_EQ(TensorBytes(example.paths[0], "a"), Range(3, 8));
  EXPECT_EQ(TensorBytes(example.paths[0], "d"), Range(8, 11));
  EXPECT_EQ(TensorBytes(example.paths[2], "c"), Range(11, 18));
}

}  // namespace
}  // namespace shardkit::safetensors
