#include "core/os/interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/os/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_dir.h"

namespace shardkit::os {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

struct Ended {
  int signal = 0;  // the signal the child died of, or 0
  std::string stderr_text;
};

// Runs `body` in a child process with the handlers installed and its stderr on a pipe; `body`
// ends by raising a signal. Returns how the child ended and what it printed.
template <typename Body>
Ended RunInterrupted(Body body) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    InstallInterruptHandlers();
    body();
    ::_exit(99);  // the signal did not end the process
  }
  ::close(pipe_fds[1]);
  Ended ended;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0) ended.stderr_text.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) ended.signal = WTERMSIG(status);
  return ended;
}

TEST(InterruptTest, RemovesTemporaryFilesReportsAndDiesOfTheSignal) {
  const std::string dir = testing::TestPath("interrupt-a");
  ASSERT_TRUE(MakeDirectories(dir).ok());
  const Ended ended = RunInterrupted([&] {
    absl::StatusOr<AtomicFile> file = AtomicFile::Create(dir + "/out.bin");
    absl::StatusOr<AtomicFile> other = AtomicFile::Create(dir + "/other.bin");
    absl::StatusOr<AtomicFile> done = AtomicFile::Create(dir + "/kept.bin");
    if (!file.ok() || !other.ok() || !done.ok() || !done->Commit().ok()) ::_exit(98);
    ScopedInterruptReport report;
    report.Set({.program = "test", .state = "first"});
    report.Set({.program = "prog", .scope = "here", .state = "DIR is as it was"});
    ::raise(SIGINT);
  });
  EXPECT_EQ(ended.signal, SIGINT);
  EXPECT_EQ(ended.stderr_text,
            "prog: interrupted (SIGINT): removed 2 temporary files here; DIR is as it was\n");
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(names, ElementsAre("kept.bin"));  // committed: stays
}

TEST(InterruptTest, RemovesCreatedDirectoriesOutputsAndProbes) {
  const std::string top = testing::TestPath("interrupt-b");
  const Ended ended = RunInterrupted([&] {
    absl::StatusOr<CreatedDirectories> made = CreatedDirectories::Make(top + "/x/y");
    if (!made.ok()) ::_exit(98);
    made->AddOwnFile(top + "/x/y/.lock");
    if (!WriteFileAtomically(top + "/x/y/.lock", "").ok()) ::_exit(98);
    InterruptCleanup output =
        InterruptCleanup::Register(top + "/x/y/out", CleanupKind::kOutputFile);
    if (!WriteFileAtomically(top + "/x/y/out", "data").ok()) ::_exit(98);
    ScopedInterruptReport report;
    report.Set({.program = "prog",
                .state = "plain",
                .state_if_removed = "DIR, which this run had created, is removed"});
    ::raise(SIGTERM);
  });
  EXPECT_EQ(ended.signal, SIGTERM);
  EXPECT_EQ(ended.stderr_text,
            "prog: interrupted (SIGTERM): removed 0 temporary files and 1 written file; DIR, "
            "which this run had created, is removed\n");
  EXPECT_FALSE(Exists(top + "/x"));

  const std::string probe = testing::TestPath("interrupt-probe");
  ASSERT_TRUE(WriteFileAtomically(probe, "").ok());
  const Ended probed = RunInterrupted([&] {
    ScopedInterruptReport report;
    report.Set({.program = "prog",
                .state = "absent",
                .probe = probe,
                .state_if_probe_present = "present"});
    ::raise(SIGHUP);
  });
  EXPECT_EQ(probed.signal, SIGHUP);
  EXPECT_THAT(probed.stderr_text, HasSubstr("removed 0 temporary files; present\n"));
}

TEST(InterruptTest, NoReportNoLineAndReleasedPathsStay) {
  const std::string path = testing::TestPath("interrupt-released");
  const Ended ended = RunInterrupted([&] {
    {
      ScopedInterruptReport report;  // gone: no line
      report.Set({.program = "prog", .state = "x"});
    }
    InterruptCleanup registration = InterruptCleanup::Register(path, CleanupKind::kOutputFile);
    if (!WriteFileAtomically(path, "kept").ok()) ::_exit(98);
    registration.Release();
    ::raise(SIGINT);
  });
  EXPECT_EQ(ended.signal, SIGINT);
  EXPECT_EQ(ended.stderr_text, "");
  EXPECT_TRUE(Exists(path));
}

TEST(InterruptTest, AnIgnoredSignalStaysIgnored) {
  const Ended ended = RunInterrupted([] {
    ::signal(SIGINT, SIG_IGN);
    InstallInterruptHandlers();
    ::raise(SIGINT);
    ::raise(SIGTERM);
  });
  EXPECT_EQ(ended.signal, SIGTERM);
}

}  // namespace
}  // namespace shardkit::os
