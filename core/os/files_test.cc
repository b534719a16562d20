#include "core/os/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/os/fd.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::os {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(FilesTest, WritesAtomicallyAndReadsBack) {
  const std::string path = testing::TestPath("a.txt");
  ASSERT_THAT(WriteFileAtomically(path, "first"), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, std::string("sec\0ond", 7)), IsOk());
  EXPECT_THAT(ReadWholeFile(path), IsOkAndHolds(std::string("sec\0ond", 7)));
}

TEST(FilesTest, UncommittedFileLeavesNothing) {
  const std::string path = testing::TestPath("uncommitted.bin");
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
  const std::string path = testing::TestPath("committed.bin");
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
  const std::string fifo = testing::TestPath("became-a-fifo");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(fifo));
  ASSERT_THAT(file.Write("abc", 3), IsOk());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THAT(file.Commit(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr(fifo + " exists and is a fifo, not a regular")));
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(NoTemporaryLeft(fifo));

  const std::string link = testing::TestPath("became-a-link");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile second, AtomicFile::Create(link));
  ASSERT_EQ(::symlink("elsewhere", link.c_str()), 0);
  EXPECT_THAT(second.Commit(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a symbolic link")));
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST(FilesTest, WriteAtInAnyOrderAndResizeGiveTheExactBytes) {
  const std::string path = testing::TestPath("ranges.bin");
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

// CopyFrom: a range of another file at an offset, inside the kernel between two regular files,
// through a buffer from what the kernel cannot copy (/dev/zero); a source cut short is named.
TEST(FilesTest, CopyFromCopiesARangeOfAnotherFile) {
  const std::string source = testing::TestPath("copy-source.bin");
  ASSERT_THAT(WriteFileAtomically(source, "0123456789abcdef"), IsOk());
  Fd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  Fd zero(::open("/dev/zero", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(in.valid() && zero.valid());
  const std::string path = testing::TestPath("copied.bin");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(path));
  EXPECT_THAT(file.CopyFrom(in.get(), source, 12, 0, 8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("copy-source.bin: file is truncated")));
  ASSERT_THAT(file.WriteAt(0, "xxxxxxxxxx", 10), IsOk());
  ASSERT_THAT(file.CopyFrom(in.get(), source, 10, 2, 6), IsOk());  // "abcdef" at 2
  ASSERT_THAT(file.CopyFrom(zero.get(), "/dev/zero", 0, 8, 2), IsOk());
  ASSERT_THAT(file.CopyFrom(in.get(), source, 3, 10, 0), IsOk());  // nothing
  ASSERT_THAT(file.Commit(), IsOk());
  EXPECT_THAT(ReadWholeFile(path), IsOkAndHolds(std::string("xxabcdef\0\0", 10)));
}

TEST(FilesTest, WriteAtAndResizeErrorsNameTheTemporaryFile) {
  const std::string path = testing::TestPath("bad-offset.bin");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(path));
  const uint64_t too_far = ~uint64_t{0} - 1;  // beyond any file: the OS rejects it
  EXPECT_THAT(file.WriteAt(too_far, "x", 1),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("bad-offset.bin.tmp." + std::to_string(::getpid()))));
  EXPECT_THAT(file.Resize(too_far),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(": cannot resize to ")));
}

TEST(FilesTest, SyncDirectory) {
  EXPECT_THAT(SyncDirectory(testing::TestPath("")), IsOk());
  EXPECT_THAT(SyncDirectory(testing::TestPath("no-such-dir")),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("no-such-dir: cannot open to sync: No such file")));
  const std::string regular = testing::TestPath("not-a-dir");
  ASSERT_THAT(WriteFileAtomically(regular, "x"), IsOk());
  EXPECT_THAT(SyncDirectory(regular),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Not a directory")));
}

TEST(FilesTest, ErrorsNameThePath) {
  EXPECT_THAT(ReadWholeFile(testing::TestPath("missing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing: no such file")));
  EXPECT_THAT(ReadWholeFile(testing::TestPath("")),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
  const std::string regular = testing::TestPath("regular");
  ASSERT_THAT(WriteFileAtomically(regular, "x"), IsOk());
  EXPECT_THAT(WriteFileAtomically(regular + "/below", "y"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
}

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

// The pid of a process that has ended (and been reaped).
pid_t GonePid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(FilesTest, CreatedDirectoriesRemovesOnlyWhatItCreatedAndOnlyIfEmpty) {
  const std::string top = testing::TestPath("made");
  ASSERT_THAT(MakeDirectories(top), IsOk());
  absl::StatusOr<CreatedDirectories> made = CreatedDirectories::Make(top + "/a/b/c/");
  ASSERT_THAT(made, IsOk());
  EXPECT_TRUE(made->created());
  made->AddOwnFile(top + "/a/b/c/.lock");
  Touch(top + "/a/b/c/.lock");
  EXPECT_TRUE(made->RemoveIfEmpty());
  EXPECT_FALSE(Exists(top + "/a"));  // its new parents with it
  EXPECT_TRUE(Exists(top));          // not this one: it was there before

  made = CreatedDirectories::Make(top + "/a/b");
  ASSERT_THAT(made, IsOk());
  Touch(top + "/a/b/written");  // something was written into it: kept
  EXPECT_FALSE(made->RemoveIfEmpty());
  EXPECT_TRUE(Exists(top + "/a/b/written"));

  made = CreatedDirectories::Make(top + "/a/b");  // exists: nothing created, nothing removed
  ASSERT_THAT(made, IsOk());
  EXPECT_FALSE(made->created());
  ASSERT_TRUE(std::filesystem::remove(top + "/a/b/written"));
  EXPECT_FALSE(made->RemoveIfEmpty());
  EXPECT_TRUE(Exists(top + "/a/b"));

  made = CreatedDirectories::Make(top + "/kept");
  ASSERT_THAT(made, IsOk());
  made->Keep();  // a run that succeeded
  EXPECT_FALSE(made->RemoveIfEmpty());
  EXPECT_TRUE(Exists(top + "/kept"));

  Touch(top + "/file");
  EXPECT_THAT(CreatedDirectories::Make(top + "/file/below").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
}

TEST(FilesTest, TemporaryNames) {
  EXPECT_EQ(TemporaryPath("d/x.bin"), "d/x.bin.tmp." + std::to_string(::getpid()));
  const std::optional<TemporaryName> temp = ParseTemporaryName("rank-00001.safetensors.tmp.42");
  ASSERT_TRUE(temp.has_value());
  EXPECT_EQ(temp->base, "rank-00001.safetensors");
  EXPECT_EQ(temp->pid, 42);
  EXPECT_EQ(ParseTemporaryName("a.tmp.b.tmp.7")->base, "a.tmp.b");
  for (const char* name : {"x.tmp.", "x.tmp.0", "x.tmp.-1", "x.tmp.1a", "x.tmp.99999999999", "x"}) {
    EXPECT_FALSE(ParseTemporaryName(name).has_value()) << name;
  }
  EXPECT_FALSE(ProcessGone(::getpid()));
  EXPECT_FALSE(ProcessGone(1));  // init: runs (EPERM for another user counts as running)
  EXPECT_TRUE(ProcessGone(GonePid()));
  // A zombie — a child killed and not reaped yet — answers kill(2) but counts as gone.
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  EXPECT_FALSE(ProcessGone(child));
  ::kill(child, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // not reaped
  EXPECT_EQ(::kill(child, 0), 0);
  EXPECT_TRUE(ProcessGone(child));
  ::waitpid(child, nullptr, 0);
}

TEST(FilesTest, RemoveDeadTemporariesLeavesRunningProcessesAndOtherKinds) {
  const std::string dir = testing::TestPath("dead-temps");
  ASSERT_THAT(MakeDirectories(dir), IsOk());
  const std::string gone = std::to_string(GonePid()), live = std::to_string(::getpid());
  for (const std::string& name : {"out.bin.tmp." + gone, "out.bin.tmp." + live,
                                  "other.bin.tmp." + gone, std::string("out.bin")}) {
    Touch(dir + "/" + name);
  }
  auto ours = [](std::string_view base) { return base == "out.bin"; };
  std::vector<std::string> left;
  EXPECT_THAT(RemoveDeadTemporaries(dir, ours, &left),
              IsOkAndHolds(ElementsAre("out.bin.tmp." + gone)));
  EXPECT_THAT(left, ElementsAre("out.bin.tmp." + live));
  EXPECT_FALSE(Exists(dir + "/out.bin.tmp." + gone));
  EXPECT_TRUE(Exists(dir + "/out.bin.tmp." + live));
  EXPECT_TRUE(Exists(dir + "/other.bin.tmp." + gone));
  EXPECT_THAT(RemoveDeadTemporaries(dir, ours), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(RemoveDeadTemporaries(dir + "/missing", ours),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot list")));
}

}  // namespace
}  // namespace shardkit::os
