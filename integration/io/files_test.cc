#include "integration/io/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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

// No "<name>.tmp.*" is left in `path`'s directory.
bool NoTemporaryLeft(const std::string& path) {
  const std::filesystem::path target(path);
  for (const auto& entry : std::filesystem::directory_iterator(target.parent_path())) {
    if (entry.path().filename().string().rfind(target.filename().string() + ".tmp.", 0) == 0) {
      return false;
    }
  }
  return true;
}

TEST(FilesTest, CommitLeavesNoTemporaryFile) {
  const std::string path = TempPath("committed.bin");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(path));
  ASSERT_THAT(file.Write("abc", 3), IsOk());
  EXPECT_FALSE(NoTemporaryLeft(path));  // the check sees the temporary while it exists
  ASSERT_THAT(file.Commit(), IsOk());
  EXPECT_TRUE(NoTemporaryLeft(path));
  EXPECT_THAT(ReadWholeFile(path), IsOkAndHolds("abc"));
}

// Something other than a regular file put at the path while the file was written is not
// replaced: Commit re-checks just before its rename, and removes its temporary file.
TEST(FilesTest, CommitLeavesWhatIsNoLongerARegularFile) {
  const std::string fifo = TempPath("became-a-fifo");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(fifo));
  ASSERT_THAT(file.Write("abc", 3), IsOk());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THAT(file.Commit(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr(fifo + " exists and is a fifo, not a regular")));
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(NoTemporaryLeft(fifo));

  const std::string link = TempPath("became-a-link");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile second, AtomicFile::Create(link));
  ASSERT_EQ(::symlink("elsewhere", link.c_str()), 0);
  EXPECT_THAT(second.Commit(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a symbolic link")));
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST(FilesTest, WriteAtInAnyOrderAndResizeGiveTheExactBytes) {
  const std::string path = TempPath("ranges.bin");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(path));
  ASSERT_THAT(file.Resize(12), IsOk());  // sized first: the last two bytes stay zero
  ASSERT_THAT(file.WriteAt(6, "ghij", 4), IsOk());
  ASSERT_THAT(file.WriteAt(0, "abc", 3), IsOk());
  ASSERT_THAT(file.WriteAt(3, "def", 3), IsOk());
  ASSERT_THAT(file.WriteAt(5, "", 0), IsOk());
  ASSERT_THAT(file.Commit(), IsOk());
  EXPECT_THAT(ReadWholeFile(path), IsOkAndHolds(std::string("abcdefghij\0\0", 12)));
  EXPECT_TRUE(NoTemporaryLeft(path));

  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile again, AtomicFile::Create(path));
  ASSERT_THAT(again.WriteAt(4, "wxyz--", 6), IsOk());  // a gap before: zeros
  ASSERT_THAT(again.Resize(8), IsOk());                // resized last: truncates
  ASSERT_THAT(again.Commit(), IsOk());
  EXPECT_THAT(ReadWholeFile(path), IsOkAndHolds(std::string("\0\0\0\0wxyz", 8)));
}

TEST(FilesTest, WriteAtAndResizeErrorsNameTheTemporaryFile) {
  const std::string path = TempPath("bad-offset.bin");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(path));
  const uint64_t too_far = ~uint64_t{0} - 1;  // beyond any file: the OS rejects it
  EXPECT_THAT(file.WriteAt(too_far, "x", 1),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("bad-offset.bin.tmp." + std::to_string(::getpid()))));
  EXPECT_THAT(file.Resize(too_far),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(": cannot resize to ")));
}

TEST(FilesTest, SyncDirectory) {
  EXPECT_THAT(SyncDirectory(TempPath("")), IsOk());
  EXPECT_THAT(SyncDirectory(TempPath("no-such-dir")),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("no-such-dir: cannot open to sync: No such file")));
  const std::string regular = TempPath("not-a-dir");
  ASSERT_THAT(WriteFileAtomically(regular, "x"), IsOk());
  EXPECT_THAT(SyncDirectory(regular),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Not a directory")));
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
