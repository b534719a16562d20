// RunRankProcesses: starts one child process per rank and supervises them until every one has
// ended — the process-management half of `shardkit launch` (launch.h builds the environments).
//
//   RunOptions options{.command = {"sh", "-c", "echo $SHARDKIT_RANK"}, .grace = absl::Seconds(5)};
//   SHARDKIT_ASSIGN_OR_RETURN(RunOutcome outcome, RunRankProcesses(options, specs));
//   return LaunchExitCode(outcome);
//
// Each rank runs in its own process group, with stdout and stderr on pipes; every line it
// writes is copied, prefixed "[rank R] ", to the launcher's stdout or stderr respectively (a
// partial last line is completed with '\n'). With `prefix_stdout` false, stdout lines are copied
// as they are (still whole lines, never interleaved mid-line): for machine-readable output such
// as `shardkit bench`'s JSON lines. When a rank fails (non-zero exit or a signal), the
// others get `grace` to finish; then their process groups get SIGTERM and, `term_to_kill` later,
// SIGKILL. SIGINT/SIGTERM/SIGHUP sent to the launcher are forwarded to every running rank's
// group (with the same SIGKILL escalation). When a rank's main process ends, what is left of its
// process group is killed, so no rank leaves orphans behind. Should the launcher die first, even
// by SIGKILL, each rank's watcher process (rank_watcher.h) SIGKILLs the rank's process group.
// Every child, watchers included, is reaped before the call returns.
// Thread-safety: call from one thread; installs signal handlers for the duration of the call.
#ifndef SHARDKIT_INTEGRATION_LAUNCH_RANK_PROCESSES_H_
#define SHARDKIT_INTEGRATION_LAUNCH_RANK_PROCESSES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardkit::launch {

struct RankProcessSpec {
  int rank = 0;                  // global rank: used in prefixes and reports
  std::vector<std::string> env;  // the complete environment, "NAME=value" entries
};

struct RunOptions {
  std::vector<std::string> command;  // argv; argv[0] is searched on PATH
  absl::Duration grace = absl::Seconds(5);
  absl::Duration term_to_kill = absl::Seconds(3);
  int stdout_fd = 1;
  int stderr_fd = 2;
  bool prefix_stdout = true;
  // Non-empty: the ranks' error prefix ("shardkit shard: "); an error line the failed ranks share
  // is printed once with their ranks, in place of their exit lines (error_lines.h). `error_hold`
  // bounds how long a line with that prefix may wait to be known as not the rank's last.
  std::string error_prefix;
  absl::Duration error_hold = absl::Seconds(2);
};

struct RankOutcome {
  int rank = 0;
  bool signaled = false;  // ended by a signal; `code` is then the signal number
  int code = 0;
  bool stopped = false;  // the launcher stopped it (grace expired, or a forwarded signal)
  bool failed() const { return !stopped && (signaled || code != 0); }
};

struct RunOutcome {
  std::vector<RankOutcome> ranks;  // in the order of the specs
  int launcher_signal = 0;         // SIGINT/SIGTERM/SIGHUP the launcher received, else 0
};

// Runs the ranks to completion. Failures are reported on `stderr_fd` as they are seen
// ("shardkit launch: rank R exited with code C" / "... killed by signal S"); with an
// `error_prefix`, an exit with a code is reported when every rank has ended, by its error line
// (ErrorLines::Finish).
// Errors: kUnavailable if a pipe or a fork fails (ranks already started are killed and reaped).
[[nodiscard]] absl::StatusOr<RunOutcome> RunRankProcesses(
    const RunOptions& options, const std::vector<RankProcessSpec>& specs);

// The launcher's exit status: the code of the lowest-numbered failed rank (128+S for signal S);
// else 128+launcher_signal if the launcher was signalled; else 0.
int LaunchExitCode(const RunOutcome& outcome);

// "shardkit launch: rank R exited with code C" or "... killed by signal S" (no newline).
std::string FailureLine(const RankOutcome& rank);

}  // namespace shardkit::launch

#endif  // SHARDKIT_INTEGRATION_LAUNCH_RANK_PROCESSES_H_
