#include "integration/formats/hf/hf_output.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::hf {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

using Files = std::vector<size_t>;

TEST(AssignFilesTest, FillsInOrderAndCutsWhereTheNextTensorDoesNotFit) {
  const FileAssignment a = AssignFiles({400, 100, 300, 200, 1}, 500);
  EXPECT_EQ(a.file_of, (Files{0, 0, 1, 1, 2}));  // 400 + 100 and 300 + 200: exactly full
  EXPECT_EQ(a.files, 3u);
}

TEST(AssignFilesTest, TensorOfExactlyTheLimitFitsAnEmptyFileOnly) {
  EXPECT_EQ(AssignFiles({500}, 500).file_of, (Files{0}));
  const FileAssignment a = AssignFiles({100, 500, 100}, 500);
  EXPECT_EQ(a.file_of, (Files{0, 1, 2}));
  EXPECT_EQ(a.files, 3u);
}

TEST(AssignFilesTest, LargerTensorGetsItsOwnFileAndTheOpenFileStaysOpen) {
  const FileAssignment a = AssignFiles({100, 600, 100, 700, 300, 1}, 500);
  // Numbered as started: the open file 0, then 600 alone (1), 700 alone (2), then the 1 that
  // no longer fits in file 0 (100 + 100 + 300 = 500).
  EXPECT_EQ(a.file_of, (Files{0, 1, 0, 2, 0, 3}));
  EXPECT_EQ(a.files, 4u);
  EXPECT_EQ(AssignFiles({600, 100}, 500).file_of, (Files{0, 1}));
}

TEST(AssignFilesTest, ZeroSizeTensorsAlwaysFitTheOpenFile) {
  const FileAssignment a = AssignFiles({0, 500, 0, 600, 0, 1, 0}, 500);
  EXPECT_EQ(a.file_of, (Files{0, 0, 0, 1, 0, 2, 2}));
  EXPECT_EQ(a.files, 3u);
  const FileAssignment empty_first = AssignFiles({0, 600}, 500);  // file 0 has no data
  EXPECT_EQ(empty_first.file_of, (Files{0, 1}));
  EXPECT_EQ(AssignFiles({0, 0, 0}, 1).files, 1u);
}

TEST(AssignFilesTest, EdgesOfTheRange) {
  EXPECT_THAT(AssignFiles({}, 500).file_of, IsEmpty());
  EXPECT_EQ(AssignFiles({}, 500).files, 0u);
  EXPECT_EQ(AssignFiles({1, 1, 1}, 1).file_of, (Files{0, 1, 2}));
  EXPECT_EQ(AssignFiles({INT64_MAX, 1, INT64_MAX}, INT64_MAX).file_of, (Files{0, 1, 2}));
  EXPECT_EQ(AssignFiles({INT64_MAX - 1, 1}, INT64_MAX).file_of, (Files{0, 0}));
}

TEST(HfFileNamesTest, OneFileIsModelSafetensors) {
  EXPECT_THAT(HfFileNames(0), ElementsAre("model.safetensors"));
  EXPECT_THAT(HfFileNames(1), ElementsAre("model.safetensors"));
  EXPECT_THAT(HfFileNames(3),
              ElementsAre("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                          "model-00003-of-00003.safetensors"));
  EXPECT_EQ(HfFileNames(123456)[41], "model-00042-of-123456.safetensors");
}

TEST(IsNumberedPartNameTest, NamesOfOneOfSeveralFiles) {
  int64_t files = 0;
  EXPECT_TRUE(IsNumberedPartName("model-00001-of-00003.safetensors", &files));
  EXPECT_EQ(files, 3);
  EXPECT_TRUE(IsNumberedPartName("diffusion_pytorch_model-2-of-2.safetensors", &files));
  EXPECT_EQ(files, 2);
  for (const char* name :
       {"model-00001-of-00001.safetensors", "model.safetensors", "rank-00000.safetensors",
        "model-00001-of-00003.safetensors.tmp.12", "model-x-of-00003.safetensors",
        "model-00001-of-3x.safetensors", "model-00001-of-.safetensors", "-of-3.safetensors",
        "model-00001-of-00003.bin"}) {
    EXPECT_FALSE(IsNumberedPartName(name, &files)) << name;
  }
}

TEST(HfIndexJsonTest, SortedAndIndentedAsSavePretrainedWritesIt) {
  EXPECT_EQ(HfIndexJson(12, {{"b", "model-00002-of-00002.safetensors"},
                             {"a", "model-00001-of-00002.safetensors"}}),
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_size\": 12\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"a\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b\": \"model-00002-of-00002.safetensors\"\n"
            "  }\n"
            "}\n");
}

TEST(LockEmptyDirectoryTest, CreatesLocksAndRefusesWhatIsNotEmpty) {
  const std::string dir = testing::TestPath("hf/new/out");
  std::optional<os::DirectoryLock> lock;
  {
    absl::StatusOr<os::DirectoryLock> first = LockEmptyDirectory(dir);
    ASSERT_THAT(first.status(), IsOk());
    lock.emplace(*std::move(first));
  }
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_THAT(LockEmptyDirectory(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another shardkit run")));
  lock.reset();
  EXPECT_THAT(LockEmptyDirectory(dir).status(), IsOk());  // the lock file alone: still empty
  for (const char* name : {"d", "a", "c", "b"}) Touch(dir + "/" + name);
  EXPECT_THAT(LockEmptyDirectory(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("out: is not empty (holds a, b, c and 1 more)")));
}

// A model folder's other files (its config, its tokenizer) may be there: they are left alone.
// Weights, or anything else, are not.
TEST(LockEmptyDirectoryTest, AModelFoldersOtherFilesStay) {
  const std::string dir = testing::TestPath("hf-model");
  fs::create_directories(dir);
  for (const char* name : {"config.json", "generation_config.json", "tokenizer.json",
                           "tokenizer_config.json", "special_tokens_map.json", "modeling_x.py"}) {
    Touch(dir + "/" + name);
  }
  {
    absl::StatusOr<os::DirectoryLock> lock = LockEmptyDirectory(dir);
    ASSERT_THAT(lock.status(), IsOk());
  }
  EXPECT_TRUE(fs::exists(dir + "/config.json"));
  EXPECT_TRUE(IsModelFolderFile("vocab.txt"));
  EXPECT_FALSE(IsModelFolderFile("model.safetensors"));
  EXPECT_FALSE(IsModelFolderFile("modeling_x.pyc"));
  EXPECT_FALSE(IsModelFolderFile("x.py"));
  Touch(dir + "/model.safetensors");  // earlier weights: not replaced
  EXPECT_THAT(LockEmptyDirectory(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(holds model.safetensors): a Hugging Face checkpoint is written "
                                 "into a new or empty directory, or one holding only a model's "
                                 "other files")));
}

TEST(LockEmptyDirectoryTest, RefusedDirectoryGetsNoLockFile) {
  const std::string dir = testing::TestPath("hf-full");
  fs::create_directories(dir);
  Touch(dir + "/notes.txt");
  EXPECT_THAT(LockEmptyDirectory(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(holds notes.txt)")));
  EXPECT_FALSE(fs::exists(dir + "/" + os::kLockFileName));
}

TEST(LockEmptyDirectoryTest, NotADirectory) {
  Touch(testing::TestPath("hf-regular"));
  EXPECT_THAT(LockEmptyDirectory(testing::TestPath("hf-regular")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a directory")));
  EXPECT_THAT(LockEmptyDirectory(testing::TestPath("hf-regular/out")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
}

}  // namespace
}  // namespace shardkit::hf
