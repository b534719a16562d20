// DirectoryLock between real processes: a forked child holds the lock, the parent's Acquire fails;
// once the child is SIGKILLed the kernel has released it and the parent's Acquire succeeds. The
// lock file exists only while held (a killed holder's is taken over), and processes hammering
// Acquire and release — each release removing the file — are never two holders at once.
#include "core/os/dir_lock.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::os {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

// A forked child that acquires the lock on `dir`, reports whether it got it, and then holds it
// until it is killed or this process closes the pipe it waits on (also when this process dies).
class LockHolder {
 public:
  explicit LockHolder(const std::string& dir) {
    int ready[2], hold[2];
    if (::pipe(ready) != 0 || ::pipe(hold) != 0) return;
    pid_ = ::fork();
    if (pid_ < 0) {
      for (int fd : {ready[0], ready[1], hold[0], hold[1]}) ::close(fd);
      return;
    }
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(hold[1]);
      absl::StatusOr<DirectoryLock> lock = DirectoryLock::Acquire(dir);
      const char got = lock.ok() ? 'y' : 'n';
      if (::write(ready[1], &got, 1) != 1) ::_exit(1);
      char byte;
      while (::read(hold[0], &byte, 1) < 0 && errno == EINTR) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    hold_ = hold[1];
    char got = 'n';
    while (::read(ready[0], &got, 1) < 0 && errno == EINTR) {
    }
    ::close(ready[0]);
    locked_ = got == 'y';
  }
  ~LockHolder() {
    Kill();
    if (hold_ >= 0) ::close(hold_);
  }

  bool locked() const { return locked_; }

  // SIGKILL, then reap: the child never releases the lock itself.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
  bool locked_ = false;
};

TEST(DirectoryLockTest, AnotherProcessHoldsItUntilItIsKilled) {
  const std::string dir = testing::FreshTestDir("held");
  LockHolder holder(dir);
  ASSERT_TRUE(holder.locked());
  const std::string held_by_other = dir +
                                    ": another shardkit run is writing this directory (it holds " +
                                    dir + "/.shardkit.lock)";
  EXPECT_THAT(DirectoryLock::Acquire(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(held_by_other)));
  holder.Kill();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock lock, DirectoryLock::Acquire(dir));
  EXPECT_EQ(lock.path(), dir + "/" + kLockFileName);
  // And now this process holds it: a new child does not get it.
  LockHolder second(dir);
  EXPECT_FALSE(second.locked());
}

TEST(DirectoryLockTest, TwoAcquiresInOneProcessConflict) {
  const std::string dir = testing::FreshTestDir("twice");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock first, DirectoryLock::Acquire(dir));
  // flock locks belong to the open file description: a second open of the file conflicts.
  EXPECT_THAT(DirectoryLock::Acquire(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(".shardkit.lock")));
  DirectoryLock moved = std::move(first);  // moving keeps it held
  EXPECT_THAT(DirectoryLock::Acquire(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another shardkit run")));
  { DirectoryLock gone = std::move(moved); }  // released with its last owner
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock again, DirectoryLock::Acquire(dir));
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + kLockFileName));
}

// One output file's lock, beside it: a second writer of the same file is told so; another file
// of the same directory is not held up.
TEST(DirectoryLockTest, AFileHasALockOfItsOwn) {
  const std::string dir = testing::FreshTestDir("file_lock");
  const std::string out = dir + "/model.safetensors";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock first, DirectoryLock::AcquireForFile(out));
  EXPECT_EQ(first.path(), dir + "/.model.safetensors.shardkit.lock");
  EXPECT_THAT(DirectoryLock::AcquireForFile(out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(out + ": another shardkit run is writing this file (it holds " +
                                 dir + "/.model.safetensors.shardkit.lock)")));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock other,
                                DirectoryLock::AcquireForFile(dir + "/other.safetensors"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock whole, DirectoryLock::Acquire(dir));
  { DirectoryLock gone = std::move(first); }
  EXPECT_FALSE(std::filesystem::exists(dir + "/.model.safetensors.shardkit.lock"));
}

TEST(DirectoryLockTest, TheLockFileExistsOnlyWhileHeld) {
  const std::string dir = testing::FreshTestDir("removed");
  const std::string path = dir + "/" + kLockFileName;
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock lock, DirectoryLock::Acquire(dir));
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // A killed holder's file stays; the next run takes it over and removes it.
  {
    LockHolder holder(dir);
    ASSERT_TRUE(holder.locked());
    holder.Kill();
  }
  EXPECT_TRUE(std::filesystem::exists(path));
  { SHARDKIT_ASSERT_OK_AND_ASSIGN(DirectoryLock lock, DirectoryLock::Acquire(dir)); }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// What the hammering processes share (an anonymous shared mapping, lock-free atomics).
struct Tally {
  std::atomic<int> holders{0};     // processes between a successful Acquire and their release
  std::atomic<int> overlaps{0};    // times a process found another holder there
  std::atomic<int> acquired{0};    // successful Acquires
  std::atomic<int> unexpected{0};  // errors other than "another shardkit run"
};

// Processes that acquire and release (removing the file) as fast as they can: the race between
// one's open and flock and another's unlink and close. Never two holders at once, and each gets
// its turns (a deadline only guards against a livelock).
TEST(DirectoryLockTest, RemovalNeverLetsTwoProcessesHoldTheLock) {
  const std::string dir = testing::FreshTestDir("hammered");
  void* memory =
      ::mmap(nullptr, sizeof(Tally), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  Tally* tally = new (memory) Tally;
  constexpr int kProcesses = 6, kTurns = 40;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid > 0) {
      children.push_back(pid);
      continue;
    }
    for (int turns = 0; turns < kTurns && std::chrono::steady_clock::now() < deadline;) {
      absl::StatusOr<DirectoryLock> lock = DirectoryLock::Acquire(dir);
      if (!lock.ok()) {
        if (lock.status().message().find("another shardkit run") == absl::string_view::npos) {
          ++tally->unexpected;
        }
        continue;
      }
      ++turns;
      ++tally->acquired;
      if (++tally->holders != 1) ++tally->overlaps;
      ::sched_yield();  // hold it for a moment, so that others open the file meanwhile
      --tally->holders;
    }  // each release removes the file
    ::_exit(0);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(tally->overlaps.load(), 0);
  EXPECT_EQ(tally->unexpected.load(), 0);
  EXPECT_EQ(tally->acquired.load(), kProcesses * kTurns);
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + kLockFileName));
  ::munmap(memory, sizeof(Tally));
}

TEST(DirectoryLockTest, MissingDirectoryNamesTheLockFile) {
  EXPECT_THAT(DirectoryLock::Acquire(testing::FreshTestDir("parent") + "/missing"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing/.shardkit.lock: cannot open the lock file: No such")));
}

}  // namespace
}  // namespace shardkit::os
