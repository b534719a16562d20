#include "integration/checkpoint/source/hf_sharded_source.h"

#include <filesystem>
#include <string>

#include "core/os/files.h"
#include "integration/formats/dcp/test_util.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::shardkit::dcp::testing::FixturePath;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

// torch 2.15's HuggingFaceStorageWriter(save_distributed=True) on 2 ranks: rows by rows, cols by
// columns, bias once. Every byte range of lengths 1 to 7 (across the pieces) is what torch saved.
TEST(HfShardedSource, ReadsWhatTorchsHuggingFaceWriterSaved) {
  ASSERT_TRUE(HfShardedSource::Holds(FixturePath("hf_sharded")));
  absl::StatusOr<std::unique_ptr<HfShardedSource>> source =
      HfShardedSource::Open(FixturePath("hf_sharded"), 64);
  ASSERT_THAT(source.status(), IsOk());
  const safetensors::Header& header = (*source)->header();
  ASSERT_EQ(header.tensors.size(), 3u);
  EXPECT_EQ(header.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  for (size_t t = 0; t < header.tensors.size(); ++t) {
    const safetensors::TensorInfo& info = header.tensors[t];
    absl::StatusOr<std::string> want =
        os::ReadWholeFile(FixturePath("hf_sharded.expected/" + info.name + ".bin"));
    ASSERT_THAT(want.status(), IsOk());
    ASSERT_EQ(info.end - info.begin, want->size()) << info.name;
    for (int64_t n = 1; n <= 7; ++n) {
      for (int64_t at = 0; at + n <= static_cast<int64_t>(want->size()); ++at) {
        std::string got(static_cast<size_t>(n), '\0');
        ASSERT_THAT((*source)->ReadBytes(t, at, n, reinterpret_cast<std::byte*>(got.data())),
                    IsOk());
        ASSERT_EQ(got, want->substr(static_cast<size_t>(at), static_cast<size_t>(n)))
            << info.name << " @" << at;
      }
    }
  }
  EXPECT_EQ((*source)->pieces(0), 1u);  // bias, saved once
  EXPECT_EQ((*source)->pieces(1), 2u);
  EXPECT_EQ((*source)->file_reads()->files, 2);
}

// Only a sharded save is one: not a directory of whole files, not a shard directory's rank files,
// not a directory without the key.
TEST(HfShardedSource, HoldsOnlyShardedSaves) {
  EXPECT_FALSE(HfShardedSource::Holds(FixturePath("basic")));
  const std::string dir = testing::FreshTestDir("hf");
  EXPECT_FALSE(HfShardedSource::Holds(dir));
  fs::copy_file(FixturePath("hf_sharded/shard-00002-model-00001-of-00001.safetensors"),
                dir + "/rank-00000.safetensors");
  fs::copy_file(FixturePath("hf_sharded/shard-00001-model-00001-of-00001.safetensors"),
                dir + "/rank-00001.safetensors");
  EXPECT_FALSE(HfShardedSource::Holds(dir)) << "rank files are a shard directory's";
}

// One file of the two: its pieces leave the rest of `rows` and `cols` unsaid — a gap.
TEST(HfShardedSource, RefusesPiecesThatDoNotTileTheirTensor) {
  const std::string dir = testing::FreshTestDir("hf");
  fs::copy_file(FixturePath("hf_sharded/shard-00002-model-00001-of-00001.safetensors"),
                dir + "/shard-00002-model-00001-of-00001.safetensors");
  EXPECT_TRUE(HfShardedSource::Holds(dir));
  EXPECT_THAT(HfShardedSource::Open(dir, 64).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor \"cols\" [3, 5]: its pieces in the files (in name "
                                 "order) do not tile it")));
}

}  // namespace
}  // namespace shardkit::checkpoint
