#include "integration/io/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "testing/status_matchers.h"

namespace shardkit::io {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : ".") + "/" + name;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(FilesTest, WritesAtomicallyAndReadsBack) {
  const std::string path = TempPath("a.txt");
  ASSERT_THAT(WriteFileAtomically(path, "first"), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, std::string("sec\0ond", 7)), IsOk());
  EXPECT_THAT(ReadWholeFile(path), IsOkAndHolds(std::string("sec\0ond", 7)));
}

TEST(FilesTest, UncommittedFileLeavesNothing) {
  const std::string path = TempPath("uncommitted.bin");
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(path));
    ASSERT_THAT(file.Write("xyz", 3), IsOk());
    EXPECT_FALSE(Exists(path));
  }
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(FilesTest, ErrorsNameThePath) {
  EXPECT_THAT(ReadWholeFile(TempPath("missing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing: no such file")));
  EXPECT_THAT(ReadWholeFile(TempPath("")), StatusIs(absl::StatusCode::kInvalidArgument, _));
  const std::string regular = TempPath("regular");
  ASSERT_THAT(WriteFileAtomically(regular, "x"), IsOk());
  EXPECT_THAT(WriteFileAtomically(regular + "/below", "y"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
}

}  // namespace
}  // namespace shardkit::io
