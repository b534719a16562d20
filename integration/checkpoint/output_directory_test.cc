// OutputDirectory on real directories, with both formats' rules (output_format.h: a shard
// directory's and shardkit's DCP checkpoint's): what DIR may hold (shardkit's own output only: a
// DCP checkpoint torch wrote, a foreign index.json or any other file is refused), writing in place
// over an interrupted run's files, replacing a complete output beside it and swapping (through a
// symbolic link too), a failed run's cleanup, what killed runs left beside DIR, the lock, and a
// rank that does not see the owner's directory.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/os/dir_lock.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/formats/dcp/dcp_output.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

constexpr char kOurIndex[] = "{\"format\":\"shardkit-shards\",\"version\":1}\n";

void Write(const std::string& path, const std::string& text = "x") { std::ofstream(path) << text; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// The pid of a process that has ended (and been reaped).
pid_t GonePid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// A complete shard directory of one rank whose files hold `tag`.
void WriteShardOutput(const std::string& dir, const std::string& tag) {
  fs::create_directories(dir);
  Write(dir + "/rank-00000.safetensors", tag);
  Write(dir + "/index.json", kOurIndex);
}

TEST(OutputDirectoryTest, ForeignContentsAreRefusedNamingThem) {
  const std::string dir = testing::FreshTestDir("foreign");
  Write(dir + "/notes.txt");
  EXPECT_THAT(PrepareOutput(dir, OutputFormat::kShardkit, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds \"notes.txt\", which is not shardkit output")));
  fs::remove(dir + "/notes.txt");
  Write(dir + "/.shardkit.lock.old");  // only the exact name counts
  EXPECT_THAT(ExamineOutput(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\".shardkit.lock.old\"")));
  fs::remove(dir + "/.shardkit.lock.old");

  // A DCP checkpoint torch wrote: the same names as shardkit's, but no marker.
  Write(dir + "/.metadata");
  Write(dir + "/__0_0.distcp");
  Write(dir + "/__1_0.distcp");
  EXPECT_THAT(PrepareOutput(dir, OutputFormat::kDcp, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(dir + ": holds a PyTorch DCP checkpoint that shardkit did not "
                                       "write (.metadata, __0_0.distcp, __1_0.distcp; no "
                                       ".shardkit-output)")));
  fs::remove(dir + "/.metadata");  // a save that has not written its metadata yet
  EXPECT_THAT(ExamineOutput(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the files of an unfinished PyTorch DCP save")));
  Write(dir + "/" + dcp::kMarkerName);  // the same files, marked as shardkit's: an interrupted run
  SHARDKIT_ASSERT_OK_AND_ASSIGN(formats::OutputContents contents, ExamineOutput(dir));
  EXPECT_TRUE(contents.any);
  EXPECT_FALSE(contents.complete);
  Write(dir + "/.metadata");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(contents, ExamineOutput(dir));
  EXPECT_TRUE(contents.complete);

  const std::string other = testing::FreshTestDir("foreign_index");
  Write(other + "/index.json", "{\"weight_map\": {}}");
  EXPECT_THAT(ExamineOutput(other),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds an index.json that is not a shardkit shard index")));
  Write(other + "/index.json", " {\n  \"format\" : \"shardkit-shards\", \"version\": 1}");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(contents, ExamineOutput(other));
  EXPECT_TRUE(contents.complete);

  Write(testing::TestPath("regular"));
  EXPECT_THAT(PrepareOutput(testing::TestPath("regular/out"), OutputFormat::kShardkit, true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
  EXPECT_THAT(PrepareOutput(testing::TestPath("regular"), OutputFormat::kShardkit, true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a directory")));
}

TEST(OutputDirectoryTest, AFreshDirectoryIsWrittenInPlace) {
  const std::string dir = testing::TestPath("fresh/a/b");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory other,
                                PrepareOutput(dir, OutputFormat::kShardkit, false));
  EXPECT_FALSE(fs::exists(testing::TestPath("fresh")));  // only the owner creates it
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out, PrepareOutput(dir, OutputFormat::kDcp, true));
  EXPECT_TRUE(fs::is_directory(dir));
  ASSERT_THAT(out.Begin(), IsOk());
  EXPECT_FALSE(out.replacing());
  EXPECT_EQ(out.place(), "");
  EXPECT_EQ(out.write_dir(), dir);
  EXPECT_TRUE(fs::exists(dir + "/" + dcp::kMarkerName));  // before any data file
  ASSERT_THAT(other.Follow(out.place()), IsOk());
  EXPECT_EQ(other.write_dir(), dir);
  Write(dir + "/__0_0.distcp");
  Write(dir + "/.metadata");
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_THAT(Names(dir), UnorderedElementsAreArray(std::vector<std::string>{
                              ".metadata", "__0_0.distcp", std::string(dcp::kMarkerName)}));
}

TEST(OutputDirectoryTest, AnInterruptedRunsFilesAreClearedInPlace) {
  const std::string dir = testing::FreshTestDir("leftovers");
  const std::string gone = std::to_string(GonePid()), live = std::to_string(::getpid());
  Write(dir + "/rank-00000.safetensors");
  Write(dir + "/rank-00004.safetensors");
  Write(dir + "/rank-00001.safetensors.tmp." + gone);
  Write(dir + "/index.json.tmp." + gone);
  Write(dir + "/rank-00001.safetensors.tmp." + live);  // a running process's: left alone
  Write(dir + "/.shardkit.lock");                      // an earlier run's lock file
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out,
                                PrepareOutput(dir, OutputFormat::kShardkit, true));
  ASSERT_THAT(out.Begin(), IsOk());
  EXPECT_FALSE(out.replacing());
  EXPECT_THAT(Names(dir),
              UnorderedElementsAreArray(std::vector<std::string>{
                  std::string(".shardkit.lock"), "rank-00001.safetensors.tmp." + live}));
  ASSERT_EQ(out.warnings().size(), 1u);
  EXPECT_THAT(out.warnings()[0], HasSubstr(dir + ": left rank-00001.safetensors.tmp." + live +
                                           " alone: its process " + live + " is running"));
  fs::remove(dir + "/rank-00001.safetensors.tmp." + live);
  Write(dir + "/rank-00000.safetensors", "new");
  Write(dir + "/index.json", kOurIndex);
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_THAT(Names(dir), UnorderedElementsAreArray(
                              std::vector<std::string>{"index.json", "rank-00000.safetensors"}));
}

TEST(OutputDirectoryTest, ACompleteOutputIsReplacedBesideItAndSwapped) {
  const std::string root = testing::FreshTestDir("replace");
  const std::string dir = root + "/out";
  WriteShardOutput(dir, "old");
  Write(dir + "/rank-00001.safetensors", "old 1");
  ::chmod(dir.c_str(), 0750);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out, PrepareOutput(dir, OutputFormat::kDcp, true));
  ASSERT_THAT(out.Begin(), IsOk());
  ASSERT_TRUE(out.replacing());
  EXPECT_EQ(fs::path(out.write_dir()).parent_path(), fs::path(root));
  EXPECT_EQ(fs::path(out.write_dir()).filename(), out.place());
  EXPECT_THAT(out.place(), HasSubstr(".out.shardkit-new-"));
  struct stat info {};
  ASSERT_EQ(::stat(out.write_dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0750u);
  // A second run is refused while this one holds the lock.
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory second,
                                PrepareOutput(dir, OutputFormat::kDcp, true));
  EXPECT_THAT(second.Begin(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another shardkit run")));
  // Until the commit, DIR holds the earlier output.
  Write(out.write_dir() + "/__0_0.distcp", "new");
  Write(out.write_dir() + "/.metadata", "new");
  EXPECT_EQ(Read(dir + "/rank-00000.safetensors"), "old");
  EXPECT_EQ(Read(dir + "/index.json"), kOurIndex);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory other,
                                PrepareOutput(dir, OutputFormat::kDcp, false));
  ASSERT_THAT(other.Follow(out.place()), IsOk());
  EXPECT_EQ(fs::canonical(other.write_dir()), fs::canonical(out.write_dir()));
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_THAT(Names(dir), UnorderedElementsAreArray(std::vector<std::string>{
                              ".metadata", "__0_0.distcp", std::string(dcp::kMarkerName)}));
  EXPECT_THAT(Names(root), UnorderedElementsAreArray(
                               std::vector<std::string>{"out"}));  // the earlier output is gone
  ASSERT_EQ(::stat(dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0750u);
}

TEST(OutputDirectoryTest, AFailedReplacementLeavesTheEarlierOutput) {
  const std::string root = testing::FreshTestDir("abandon");
  const std::string dir = root + "/out";
  WriteShardOutput(dir, "old");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out,
                                PrepareOutput(dir, OutputFormat::kShardkit, true));
  ASSERT_THAT(out.Begin(), IsOk());
  Write(out.write_dir() + "/rank-00000.safetensors", "new");
  out.Abandon();
  EXPECT_THAT(Names(root), UnorderedElementsAreArray(std::vector<std::string>{"out"}));
  EXPECT_THAT(Names(dir), UnorderedElementsAreArray(
                              std::vector<std::string>{"index.json", "rank-00000.safetensors"}));
  EXPECT_EQ(Read(dir + "/rank-00000.safetensors"), "old");
  // What a killed run left beside DIR goes with the next run; other names beside it stay.
  fs::create_directories(root + "/.out.shardkit-new-0123456789abcdef/x");
  fs::create_directories(root + "/.out.shardkit-new-keep");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory next,
                                PrepareOutput(dir, OutputFormat::kShardkit, true));
  ASSERT_THAT(next.Begin(), IsOk());
  EXPECT_THAT(Names(root), UnorderedElementsAreArray(std::vector<std::string>{
                               "out", ".out.shardkit-new-keep", next.place()}));
  next.Abandon();
}

TEST(OutputDirectoryTest, AFailedRunInPlaceRemovesWhatItWroteAndTheDirectoryItMade) {
  const std::string root = testing::FreshTestDir("abandon_in_place");
  const std::string dir = root + "/a/out";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out, PrepareOutput(dir, OutputFormat::kDcp, true));
  ASSERT_THAT(out.Begin(), IsOk());
  Write(dir + "/__0_0.distcp");
  out.Abandon();
  EXPECT_FALSE(fs::exists(root + "/a"));
  // A directory that was there before stays, emptied of this run's files.
  fs::create_directories(dir);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory again,
                                PrepareOutput(dir, OutputFormat::kDcp, true));
  ASSERT_THAT(again.Begin(), IsOk());
  Write(dir + "/__0_0.distcp");
  again.Abandon();
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));
  // A refused run touches nothing: a torch checkpoint stays as it was.
  Write(dir + "/.metadata");
  Write(dir + "/__0_0.distcp");
  absl::StatusOr<OutputDirectory> refused = PrepareOutput(dir, OutputFormat::kDcp, true);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("did not write")));
  EXPECT_THAT(Names(dir),
              UnorderedElementsAreArray(std::vector<std::string>{".metadata", "__0_0.distcp"}));
}

TEST(OutputDirectoryTest, ALinkedDirectoryIsReplacedWhereItPoints) {
  const std::string root = testing::FreshTestDir("linked");
  WriteShardOutput(root + "/real", "old");
  fs::create_directory_symlink(root + "/real", root + "/link");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out,
                                PrepareOutput(root + "/link", OutputFormat::kShardkit, true));
  ASSERT_THAT(out.Begin(), IsOk());
  Write(out.write_dir() + "/rank-00000.safetensors", "new");
  Write(out.write_dir() + "/index.json", kOurIndex);
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_TRUE(fs::is_symlink(root + "/link"));
  EXPECT_EQ(Read(root + "/real/rank-00000.safetensors"), "new");
  EXPECT_THAT(Names(root), UnorderedElementsAreArray(std::vector<std::string>{"real", "link"}));
}

// Where the file system cannot exchange, the commit sets DIR aside and moves the new output in
// (interrupts held); what a run killed between the two renames leaves — no DIR, the earlier output
// beside it — is put back by the next run into DIR.
TEST(OutputDirectoryTest, WithoutAnExchangeTheEarlierOutputIsSetAsideAndPutBack) {
  const std::string root = testing::FreshTestDir("set_aside");
  const std::string dir = root + "/out";
  WriteShardOutput(dir, "old");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory out,
                                PrepareOutput(dir, OutputFormat::kShardkit, true));
  ASSERT_THAT(out.Begin(), IsOk());
  out.SetAsideForTest();
  Write(out.write_dir() + "/rank-00000.safetensors", "new");
  Write(out.write_dir() + "/index.json", kOurIndex);
  ASSERT_THAT(out.Commit(), IsOk());
  EXPECT_EQ(Read(dir + "/rank-00000.safetensors"), "new");
  EXPECT_THAT(Names(root), UnorderedElementsAreArray(std::vector<std::string>{"out"}));

  // A run killed between the two renames: no DIR, the earlier output set aside, the new one
  // beside it.
  fs::rename(dir, root + "/.out.shardkit-old-00000000000000aa");
  WriteShardOutput(root + "/.out.shardkit-new-00000000000000aa", "newer");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory next,
                                PrepareOutput(dir, OutputFormat::kShardkit, true));
  EXPECT_EQ(Read(dir + "/rank-00000.safetensors"), "new");  // put back before anything else
  ASSERT_THAT(next.Begin(), IsOk());
  ASSERT_TRUE(next.replacing());
  EXPECT_THAT(Names(root),
              UnorderedElementsAreArray(std::vector<std::string>{"out", next.place()}));
  next.Abandon();
  EXPECT_THAT(Names(root), UnorderedElementsAreArray(std::vector<std::string>{"out"}));
  // An earlier output set aside stays while DIR holds none (it is what the user would get back).
  fs::create_directories(root + "/.out.shardkit-old-00000000000000bb");
  Write(root + "/.out.shardkit-old-00000000000000bb/notes", "kept");
  fs::remove_all(dir);
  fs::create_directories(dir);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory empty,
                                PrepareOutput(dir, OutputFormat::kShardkit, true));
  ASSERT_THAT(empty.Begin(), IsOk());
  EXPECT_TRUE(fs::exists(root + "/.out.shardkit-old-00000000000000bb/notes"));
  empty.Abandon();
}

// Writing in place where this rank's DIR holds a complete output the owner does not see (another
// host's disk) would mix two outputs: refused.
TEST(OutputDirectoryTest, InPlaceOverAnotherDisksCompleteOutputIsRefused) {
  const std::string dir = testing::FreshTestDir("other_disk");
  WriteShardOutput(dir, "theirs");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory other,
                                PrepareOutput(dir, OutputFormat::kShardkit, false));
  EXPECT_THAT(other.Follow(""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds a complete earlier output on this rank that the source "
                                 "rank does not see")));
  EXPECT_EQ(Read(dir + "/rank-00000.safetensors"), "theirs");
}

TEST(OutputDirectoryTest, ARankThatDoesNotSeeTheNewDirectoryFails) {
  const std::string root = testing::FreshTestDir("follow");
  const std::string dir = root + "/out";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(OutputDirectory other,
                                PrepareOutput(dir, OutputFormat::kShardkit, false));
  EXPECT_THAT(other.Follow(".out.shardkit-new-0000000000000000"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("which this rank does not see: replacing an output needs a file "
                                 "system every rank shares")));
  ASSERT_THAT(other.Follow(""), IsOk());  // in place: made here if missing (another host's disk)
  EXPECT_TRUE(fs::is_directory(dir));
}

}  // namespace
}  // namespace shardkit::checkpoint
