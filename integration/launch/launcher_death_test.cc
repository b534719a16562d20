// End to end, with the real binary: when `shardkit launch` itself is killed with SIGKILL (no
// handler runs, nothing is forwarded), every process of every rank — also what a rank started
// in the background — is gone within 2 s.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "testing/test_dir.h"

extern char** environ;

namespace shardkit::launch {
namespace {

using ::testing::IsEmpty;

constexpr int kRanks = 3;
constexpr size_t kPidsPerRank = 2;  // the rank's shell and its background sleep

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The pids on complete lines only: a rank may be halfway through writing one.
std::vector<pid_t> ReadPids(const std::string& path) {
  std::vector<std::string> lines = absl::StrSplit(ReadFile(path), '\n');
  lines.pop_back();  // what follows the last '\n': empty, or a line still being written
  std::vector<pid_t> pids;
  for (const std::string& line : lines) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

// A zombie counts as gone: once the launcher is dead, its orphans are reaped by whoever
// inherits them, which this test does not control.
bool IsAlive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // read(2), not a stream: reading the file of a process that just ended fails with ESRCH.
  char buffer[512];
  const int fd = ::open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  const ssize_t n = fd < 0 ? -1 : ::read(fd, buffer, sizeof(buffer));
  if (fd >= 0) ::close(fd);
  if (n <= 0) return false;  // ended between the two checks
  const std::string_view stat(buffer, static_cast<size_t>(n));
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || stat.compare(paren, 3, ") Z") != 0;
}

// Kills whatever the test started when it ends, passed or failed, so that nothing outlives it:
// the launcher, then every recorded pid and the process group it may lead (a rank's shell
// leads its rank's group, which also holds a background sleep not recorded yet).
class KillOnExit {
 public:
  explicit KillOnExit(std::string pidfile) : pidfile_(std::move(pidfile)) {}
  ~KillOnExit() {
    if (launcher_ > 0) {
      ::kill(launcher_, SIGKILL);
      ::waitpid(launcher_, nullptr, 0);
    }
    for (pid_t pid : ReadPids(pidfile_)) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
  }
  void set_launcher(pid_t pid) { launcher_ = pid; }

 private:
  std::string pidfile_;
  pid_t launcher_ = -1;
};

// Starts `shardkit launch --nproc 3 -- sh -c SCRIPT`; each rank appends its shell's pid and
// its background sleep's pid to `pidfile`, then waits. Output goes to /dev/null.
pid_t StartLauncher(const std::string& pidfile) {
  const std::string bin =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/shardkit/integration/shardkit");
  const std::string file = absl::StrCat("'", pidfile, "'");
  const std::string script =
      absl::StrCat("echo $$ >> ", file, "; sleep 100 & echo $! >> ", file, "; wait");
  std::vector<std::string> args = {bin,  "launch", "--nproc", absl::StrCat(kRanks),
                                   "--", "sh",     "-c",      script};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

TEST(LauncherDeathTest, SigkilledLauncherTakesEveryRankProcessWithIt) {
  const std::string pidfile = testing::TestPath("rank_pids");
  KillOnExit kill_on_exit(pidfile);
  const pid_t launcher = StartLauncher(pidfile);
  ASSERT_GT(launcher, 0) << "cannot start the shardkit binary";
  kill_on_exit.set_launcher(launcher);

  std::vector<pid_t> pids;
  const absl::Time started_by = absl::Now() + absl::Seconds(30);
  while ((pids = ReadPids(pidfile)).size() < kRanks * kPidsPerRank && absl::Now() < started_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(pids.size(), kRanks * kPidsPerRank) << "the ranks did not all start: " << pidfile;

  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  ::waitpid(launcher, nullptr, 0);
  kill_on_exit.set_launcher(-1);
  std::vector<pid_t> alive = pids;
  while (!alive.empty() && absl::Now() < killed + absl::Seconds(2)) {
    std::erase_if(alive, [](pid_t pid) { return !IsAlive(pid); });
    if (!alive.empty()) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_THAT(alive, IsEmpty()) << "still running 2 s after the launcher was killed";
  if (alive.empty()) {
    std::cout << "all rank processes gone " << absl::FormatDuration(absl::Now() - killed)
              << " after the launcher's SIGKILL\n";
  }
}

}  // namespace
}  // namespace shardkit::launch
