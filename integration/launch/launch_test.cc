// Unit tests of the launcher pieces, with real child processes for RunRankProcesses.
#include "integration/launch/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "integration/launch/error_lines.h"
#include "integration/launch/line_prefixer.h"
#include "integration/launch/rank_processes.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::launch {
namespace {

using ::absl::StatusCode;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

TEST(LinePrefixerTest, WholeLinesOnlyAndFlush) {
  LinePrefixer p("[rank 1] ");
  EXPECT_EQ(p.Feed("a\nb"), "[rank 1] a\n");
  EXPECT_EQ(p.Feed("c\n\n"), "[rank 1] bc\n[rank 1] \n");
  EXPECT_EQ(p.Feed("tail"), "");
  EXPECT_EQ(p.Flush(), "[rank 1] tail\n");
  EXPECT_EQ(p.Flush(), "");
}

TEST(LinePrefixerTest, VeryLongLinePassesThroughOnce) {
  LinePrefixer p("> ");
  std::string big(LinePrefixer::kMaxPending + 1, 'x');
  EXPECT_EQ(p.Feed(big), "> " + big);
  EXPECT_EQ(p.Feed("y\nz\n"), "y\n> z\n");
  EXPECT_EQ(p.Feed("w"), "");
  EXPECT_EQ(p.Flush(), "> w\n");
}

RankOutcome Exited(int rank, int code) { return RankOutcome{.rank = rank, .code = code}; }

TEST(ErrorLinesTest, HoldsOnlyALastLineWithThePrefix) {
  ErrorLines errors("cmd: ", absl::Seconds(2));
  const absl::Time t = absl::Now();
  EXPECT_EQ(errors.Feed(0, "[rank 0] note\n[rank 0] cmd: step 1\n", t), "[rank 0] note\n");
  EXPECT_EQ(errors.Feed(0, "[rank 0] cmd: step 2\n", t), "[rank 0] cmd: step 1\n");
  EXPECT_EQ(errors.Feed(0, "[rank 0] cmd: fails\n", t), "[rank 0] cmd: step 2\n");
  errors.StreamEnded(0);
  EXPECT_EQ(errors.Finish({Exited(0, 2)}), "rank 0: cmd: fails\n");
}

TEST(ErrorLinesTest, GroupsSharedErrorsAndKeepsExitLinesOfRanksWithout) {
  ErrorLines errors("cmd: ", absl::Seconds(2));
  const absl::Time t = absl::Now();
  for (int rank : {2, 0, 1}) {
    EXPECT_EQ(errors.Feed(rank, RankLinePrefix(rank) + "cmd: plan is bad\n", t), "");
  }
  EXPECT_EQ(errors.Feed(3, "[rank 3] cmd: disk full\n", t), "");
  EXPECT_EQ(errors.Feed(5, "[rank 5] cmd: done\n", t), "");
  EXPECT_EQ(errors.Finish({Exited(0, 2), Exited(1, 2), Exited(2, 2), Exited(3, 1), Exited(4, 2),
                           Exited(5, 0)}),
            "[rank 5] cmd: done\n"
            "ranks 0-2: cmd: plan is bad\n"
            "rank 3: cmd: disk full\n"
            "shardkit launch: rank 4 exited with code 2\n");
}

TEST(ErrorLinesTest, ReleasesAHeldLineAfterTheHoldWhileItsStreamIsOpen) {
  ErrorLines errors("cmd: ", absl::Seconds(2));
  const absl::Time t = absl::Now();
  EXPECT_EQ(errors.Feed(0, "[rank 0] cmd: 1/3 parameters\n", t), "");
  EXPECT_EQ(errors.Feed(1, "[rank 1] cmd: failed\n", t), "");
  EXPECT_EQ(errors.NextDue(), t + absl::Seconds(2));
  EXPECT_EQ(errors.ReleaseDue(t + absl::Seconds(1)), "");
  errors.StreamEnded(1);  // rank 1 ended: its line waits for Finish
  EXPECT_EQ(errors.ReleaseDue(t + absl::Seconds(2)), "[rank 0] cmd: 1/3 parameters\n");
  EXPECT_EQ(errors.NextDue(), std::nullopt);
  // Signalled and stopped ranks' lines are theirs, not errors to group.
  RankOutcome killed{.rank = 1, .signaled = true, .code = 9};
  EXPECT_EQ(errors.Finish({Exited(0, 0), killed}), "[rank 1] cmd: failed\n");
}

TEST(ErrorLinesTest, PassesPiecesOfOverLongLinesThrough) {
  ErrorLines errors("cmd: ", absl::Seconds(2));
  EXPECT_EQ(errors.Feed(0, "[rank 0] cmd: xxxx", absl::Now()), "[rank 0] cmd: xxxx");
  EXPECT_EQ(errors.Feed(0, "yyy\n", absl::Now()), "yyy\n");
}

LaunchOptions Options(int nproc) {
  LaunchOptions options;
  options.nproc = nproc;
  options.command = {"true"};
  return options;
}

TEST(LaunchOptionsTest, RejectsBadInput) {
  EXPECT_THAT(ValidateLaunchOptions(Options(0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--nproc must be >= 1")));
  LaunchOptions offset = Options(2);
  offset.world = 3;
  offset.rank_offset = 2;
  offset.store_url = "redis://h:1";
  EXPECT_THAT(ValidateLaunchOptions(offset),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ranks 2..3")));
  LaunchOptions multi = Options(2);
  multi.world = 4;
  EXPECT_THAT(ValidateLaunchOptions(multi),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("needs a shared --store")));
  multi.store_url = "tcp://127.0.0.1:0";
  EXPECT_THAT(ValidateLaunchOptions(multi),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("must all name the same port")));
  multi.store_url = "tcp://127.0.0.1:29500";
  EXPECT_THAT(ValidateLaunchOptions(multi), IsOk());
  LaunchOptions no_command = Options(1);
  no_command.command.clear();
  EXPECT_THAT(ValidateLaunchOptions(no_command),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing command")));
  LaunchOptions timeout = Options(1);
  timeout.timeout_s = 0;
  EXPECT_THAT(ValidateLaunchOptions(timeout),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--timeout must be > 0")));
  EXPECT_THAT(ValidateLaunchOptions(Options(3)), IsOk());
}

TEST(RankSpecsTest, EnvironmentPerRankFlagsBeatEnvironment) {
  LaunchOptions options = Options(2);
  options.world = 5;
  options.rank_offset = 3;
  options.timeout_s = 2.5;
  const std::vector<std::string> base = {"PATH=/bin", "SHARDKIT_TIMEOUT=99",
                                         "SHARDKIT_BACKEND=nccl", "SHARDKIT_RANK=7"};
  std::vector<RankProcessSpec> specs =
      RankSpecs(options, base, "redis://h:1/r", "run-x", "launch-y");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].rank, 4);
  EXPECT_THAT(specs[1].env,
              UnorderedElementsAre("PATH=/bin", "SHARDKIT_RANK=4", "SHARDKIT_LOCAL_RANK=1",
                                   "SHARDKIT_WORLD_SIZE=5", "SHARDKIT_LOCAL_WORLD_SIZE=2",
                                   "SHARDKIT_BACKEND=nccl", "SHARDKIT_STORE=redis://h:1/r",
                                   "SHARDKIT_RUN_ID=run-x", "SHARDKIT_LAUNCH_ID=launch-y",
                                   "SHARDKIT_TIMEOUT=2.5"));
  // Single host: the Gloo address defaults to loopback unless one is already chosen.
  EXPECT_THAT(RankSpecs(Options(1), {}, "file:///s", "r", "l")[0].env,
              Contains("SHARDKIT_HOSTNAME=127.0.0.1"));
  EXPECT_THAT(RankSpecs(Options(1), {"SHARDKIT_IFNAME=eth0"}, "file:///s", "r", "l")[0].env,
              Not(Contains("SHARDKIT_HOSTNAME=127.0.0.1")));
}

TEST(LaunchExitCodeTest, LowestFailedRankWinsStoppedRanksDoNotCount) {
  RunOutcome outcome;
  outcome.ranks = {{0, false, 143, true}, {1, true, 9, false}, {2, false, 3, false}};
  EXPECT_EQ(LaunchExitCode(outcome), 128 + 9);
  EXPECT_EQ(FailureLine(outcome.ranks[1]), "shardkit launch: rank 1 killed by signal 9");
  EXPECT_EQ(FailureLine(outcome.ranks[2]), "shardkit launch: rank 2 exited with code 3");
  outcome.ranks = {{0, false, 143, true}, {1, false, 0, false}};
  EXPECT_EQ(LaunchExitCode(outcome), 0);
  outcome.launcher_signal = SIGINT;
  EXPECT_EQ(LaunchExitCode(outcome), 130);
}

// Runs `script` (sh -c) as `nproc` ranks with output captured in files.
struct Captured {
  RunOutcome outcome;
  std::string out, err;
  absl::Duration took;
};

Captured RunScript(int nproc, const std::string& script, absl::Duration grace,
                   bool prefix_stdout = true, const std::string& error_prefix = "") {
  static int counter = 0;
  const std::string base = testing::TestPath(absl::StrCat("run", ++counter));
  int out_fd = ::open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err_fd = ::open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  RunOptions options;
  options.command = {"sh", "-c", script};
  options.grace = grace;
  options.term_to_kill = absl::Milliseconds(300);
  options.stdout_fd = out_fd;
  options.stderr_fd = err_fd;
  options.prefix_stdout = prefix_stdout;
  options.error_prefix = error_prefix;
  LaunchOptions launch = Options(nproc);
  std::vector<RankProcessSpec> specs =
      RankSpecs(launch, {"PATH=/usr/bin:/bin"}, "file:///x", "r", "l");
  const absl::Time start = absl::Now();
  auto outcome = RunRankProcesses(options, specs);
  Captured captured;
  captured.took = absl::Now() - start;
  ::close(out_fd);
  ::close(err_fd);
  EXPECT_THAT(outcome, IsOk());
  if (outcome.ok()) captured.outcome = *outcome;
  std::stringstream out, err;
  out << std::ifstream(base + ".out").rdbuf();
  err << std::ifstream(base + ".err").rdbuf();
  captured.out = out.str();
  captured.err = err.str();
  return captured;
}

TEST(RunRankProcessesTest, PrefixesEachStreamSeparately) {
  Captured run = RunScript(2, "echo out$SHARDKIT_RANK; echo err$SHARDKIT_RANK >&2; printf tail",
                           absl::Seconds(5));
  EXPECT_THAT(run.out, HasSubstr("[rank 0] out0\n"));
  EXPECT_THAT(run.out, HasSubstr("[rank 1] out1\n"));
  EXPECT_THAT(run.out, HasSubstr("[rank 1] tail\n"));
  EXPECT_THAT(run.out, Not(HasSubstr("err")));
  EXPECT_THAT(run.err, HasSubstr("[rank 0] err0\n"));
  EXPECT_EQ(LaunchExitCode(run.outcome), 0);
}

TEST(RunRankProcessesTest, UnprefixedStdoutKeepsWholeLinesAndPrefixesStderr) {
  Captured run = RunScript(2, "echo out$SHARDKIT_RANK; echo err$SHARDKIT_RANK >&2; printf tail",
                           absl::Seconds(5), /*prefix_stdout=*/false);
  EXPECT_THAT(run.out, HasSubstr("out0\n"));
  EXPECT_THAT(run.out, HasSubstr("out1\n"));
  EXPECT_THAT(run.out, Not(HasSubstr("[rank")));
  EXPECT_EQ(run.out.size(), std::string("out0\nout1\ntail\ntail\n").size());
  EXPECT_THAT(run.err, HasSubstr("[rank 0] err0\n"));
}

TEST(RunRankProcessesTest, SharedErrorIsPrintedOnceWithItsRanks) {
  Captured run = RunScript(3,
                           "echo cmd: starting >&2; echo out; echo cmd: bad plan >&2; "
                           "[ $SHARDKIT_RANK = 1 ] && exit 0; exit 2",
                           absl::Seconds(5), /*prefix_stdout=*/true, "cmd: ");
  EXPECT_EQ(LaunchExitCode(run.outcome), 2);
  EXPECT_THAT(run.err, HasSubstr("[rank 2] cmd: starting\n"));
  EXPECT_THAT(run.err, HasSubstr("[rank 1] cmd: bad plan\n"));  // rank 1 succeeded: its own line
  EXPECT_THAT(run.err, HasSubstr("\nranks 0, 2: cmd: bad plan\n"));
  EXPECT_THAT(run.err, Not(HasSubstr("exited with code")));
  EXPECT_THAT(run.err, Not(HasSubstr("[rank 0] cmd: bad plan")));
  EXPECT_THAT(run.out, HasSubstr("[rank 0] out\n"));
}

TEST(RunRankProcessesTest, SleeperIsStoppedAfterGraceAndNotCounted) {
  Captured run = RunScript(3, "case $SHARDKIT_RANK in 0) sleep 60;; 1) exit 0;; 2) exit 7;; esac",
                           absl::Milliseconds(200));
  EXPECT_EQ(LaunchExitCode(run.outcome), 7);
  EXPECT_TRUE(run.outcome.ranks[0].stopped);
  EXPECT_THAT(run.err, HasSubstr("shardkit launch: rank 2 exited with code 7\n"));
  EXPECT_THAT(run.err, HasSubstr("stopping rank(s) 0"));
  EXPECT_THAT(run.err, Not(HasSubstr("rank 0 exited")));
  EXPECT_LT(run.took, absl::Seconds(5));
}

TEST(RunRankProcessesTest, TermIgnoringRankIsKilled) {
  Captured run = RunScript(2, "trap '' TERM; [ $SHARDKIT_RANK = 1 ] && kill -KILL $$; sleep 60",
                           absl::Milliseconds(100));
  EXPECT_EQ(LaunchExitCode(run.outcome), 128 + 9);
  EXPECT_THAT(run.err, HasSubstr("shardkit launch: rank 1 killed by signal 9\n"));
  EXPECT_LT(run.took, absl::Seconds(5));
}

TEST(RunRankProcessesTest, NoRankOrWatcherOutlivesTheRun) {
  Captured run = RunScript(3, "exit 0", absl::Seconds(1));
  EXPECT_EQ(LaunchExitCode(run.outcome), 0);
  // Every child, the ranks' watchers included, has been reaped: not even a zombie is left.
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(RunRankProcessesTest, BackgroundChildrenDoNotOutliveTheirRank) {
  const std::string pidfile = testing::TestPath("bg.pid");
  Captured run = RunScript(1, "sleep 60 & echo $! > " + pidfile + "; exit 0", absl::Seconds(1));
  EXPECT_EQ(LaunchExitCode(run.outcome), 0);
  EXPECT_LT(run.took, absl::Seconds(5));
  std::ifstream in(pidfile);
  pid_t pid = 0;
  in >> pid;
  ASSERT_GT(pid, 0);
  // The orphan was killed with the rank's process group (its init-reaped zombie may linger).
  absl::SleepFor(absl::Milliseconds(100));
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(content.empty() || content.find(") Z") != std::string::npos) << content;
}

}  // namespace
}  // namespace shardkit::launch
