// Whether a peer's process still runs, read from /proc: a live process, one that exited (a
// zombie until reaped, then no such PID), another host's, and identities that cannot be read.
#include "backends/ucx/internal/peer_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace shardkit::ucx_backend {
namespace {

// ThisProcess() of a forked child that waits for a byte on `release` and then exits.
std::string ChildIdentity(pid_t& pid, int& release) {
  int to_child[2], from_child[2];
  EXPECT_EQ(pipe(to_child), 0);
  EXPECT_EQ(pipe(from_child), 0);
  pid = fork();
  if (pid == 0) {
    const std::string me = ThisProcess();
    (void)!write(from_child[1], me.data(), me.size());
    close(from_child[1]);
    char byte;
    (void)!read(to_child[0], &byte, 1);
    _exit(0);
  }
  close(from_child[1]);
  close(to_child[0]);
  char buffer[512] = {};
  const ssize_t n = read(from_child[0], buffer, sizeof(buffer) - 1);
  close(from_child[0]);
  release = to_child[1];
  return std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0);
}

TEST(PeerProcess, LiveThenZombieThenGone) {
  pid_t pid = -1;
  int release = -1;
  const std::string child = ChildIdentity(pid, release);
  EXPECT_TRUE(OnThisHost(child)) << child;
  EXPECT_FALSE(ProcessGone(child)) << child;
  EXPECT_FALSE(ProcessGone(ThisProcess()));
  ASSERT_EQ(write(release, "x", 1), 1);
  close(release);
  // Exited but not reaped: a zombie, which no longer runs.
  for (int i = 0; i < 1000 && !ProcessGone(child); ++i) usleep(1000);
  EXPECT_TRUE(ProcessGone(child));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(ProcessGone(child));
}

TEST(PeerProcess, AnotherHostOrNamespaceIsNotJudged) {
  const std::string me = ThisProcess();
  const std::string elsewhere = "another-boot/pid:[1] " + me.substr(me.find(' ') + 1);
  EXPECT_FALSE(OnThisHost(elsewhere));
  EXPECT_FALSE(ProcessGone(elsewhere));
  EXPECT_FALSE(ProcessGone(""));
  EXPECT_FALSE(ProcessGone("garbage"));
}

TEST(PeerProcess, ReusedPidIsGone) {
  // The same host and PID with another start time: the PID now belongs to another process.
  const std::string me = ThisProcess();
  const std::string older = me.substr(0, me.rfind(' ')) + " 1";
  EXPECT_TRUE(ProcessGone(older));
}

}  // namespace
}  // namespace shardkit::ucx_backend
