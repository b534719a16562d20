// FileStore specifics: directory creation errors, sharing between instances and between forked
// processes (the way ranks use it), key limits.
#include "core/store/file_store.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit {
namespace {

using ::absl::StatusCode;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(FileStoreTest, CreatesNestedDirectories) {
  const std::string dir = testing::TestPath("nested/a/b/");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileStore> store, FileStore::Open(dir));
  EXPECT_EQ(store->dir(), testing::TestPath("nested/a/b"));
  EXPECT_EQ(::access(store->dir().c_str(), W_OK), 0);
}

TEST(FileStoreTest, PathBelowRegularFileIsInvalidArgument) {
  const std::string file = testing::TestPath("regular_file");
  std::ofstream(file) << "not a directory";
  const std::string dir = file + "/store";
  EXPECT_THAT(FileStore::Open(dir),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("cannot create directory \"" + dir + "\""),
                             HasSubstr("Not a directory"))));
  EXPECT_THAT(FileStore::Open(file),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
  EXPECT_THAT(FileStore::Open(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
}

TEST(FileStoreTest, InstancesOnOneDirectoryShareKeys) {
  const std::string dir = testing::TestPath("shared");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileStore> a, FileStore::Open(dir));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileStore> b, FileStore::Open(dir));
  ASSERT_THAT(a->Set("x/y", "1"), IsOk());
  EXPECT_THAT(b->Get("x/y", absl::Seconds(1)), IsOkAndHolds("1"));
  EXPECT_THAT(b->Add("n", 2), IsOkAndHolds(2));
  EXPECT_THAT(a->Add("n", 2), IsOkAndHolds(4));
}

TEST(FileStoreTest, TooLongKeyIsInvalidArgument) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileStore> store,
                                FileStore::Open(testing::TestPath("long")));
  EXPECT_THAT(store->Set(std::string(200, 'k'), "v"), IsOk());
  EXPECT_THAT(store->Set(std::string(201, 'k'), "v"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("too long")));
  EXPECT_THAT(store->Set(std::string(100, '/'), "v"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("300 bytes encoded")));
}

// Forked processes, as ranks: each adds to one counter, publishes its own key, then reads every
// other process's key. Exit status is the failure channel.
TEST(FileStoreTest, ForkedProcessesHammerOneStore) {
  constexpr int kProcs = 4;
  constexpr int kAdds = 150;
  const std::string dir = testing::TestPath("forked");
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid > 0) {
      pids.push_back(pid);
      continue;
    }
    auto store = FileStore::Open(dir);
    if (!store.ok()) ::_exit(10);
    for (int i = 0; i < kAdds; ++i) {
      if (!(*store)->Add("counter", 1).ok()) ::_exit(11);
      if (!(*store)->Set("last", std::string(1000, static_cast<char>('a' + p))).ok()) ::_exit(12);
      auto last = (*store)->Get("last", absl::Seconds(5));
      if (!last.ok() || last->size() != 1000) ::_exit(13);  // never a partial value
    }
    if (!(*store)->Set(absl::StrCat("rank/", p), absl::StrCat(p * 7)).ok()) ::_exit(14);
    for (int q = 0; q < kProcs; ++q) {
      auto value = (*store)->Get(absl::StrCat("rank/", q), absl::Seconds(20));
      if (!value.ok() || *value != absl::StrCat(q * 7)) ::_exit(15);
    }
    ::_exit(0);
  }
  for (int p = 0; p < kProcs; ++p) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[p], &status, 0), pids[p]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "process " << p << " status " << status;
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileStore> store, FileStore::Open(dir));
  EXPECT_THAT(store->Add("counter", 0), IsOkAndHolds(kProcs * kAdds));
}

}  // namespace
}  // namespace shardkit
