// RankWatcher: a tiny process per rank that kills the rank's process group if the launcher dies
// while the rank is still its unreaped child — also when the launcher is killed with SIGKILL,
// where no handler of its own can run. PR_SET_PDEATHSIG would reach only the rank's main
// process (and fires when the forking *thread* ends); this reaches everything left in the
// rank's process group.
//
//   RankWatcher watcher;
//   SHARDKIT_RETURN_IF_ERROR(watcher.Start());  // before forking the rank
//   pid_t pid = fork();
//   if (pid == 0) { setpgid(0, 0); watcher.Announce(); execvp(...); }
//   ...                                         // later: the rank has ended (still a zombie)
//   kill(-pid, SIGKILL);                        // what is left of its group
//   watcher.Stop();                             // then reap the rank
//
// How: Start forks the watcher (in a process group of its own, all signals blocked, every fd
// closed but the read end of a pipe whose write end only the launcher holds). The rank's child
// writes its pid (= its process group id) into that pipe before exec, so there is no moment
// when a running rank is unknown to its watcher. The watcher then blocks reading; end of file
// means every holder of the write end is gone: the launcher died, so it SIGKILLs the group and
// exits. On the normal path the launcher SIGKILLs and reaps the watcher itself (Stop) before it
// reaps the rank, so a watcher never acts on a group id that may have been reused, and never
// outlives the run. Processes that moved to another process group (setsid, setpgid) are not
// reached — as on the normal path.
//
// One watcher per rank rather than one for all: its only state is one pid, learned once, and
// it ends with its rank, so there is no protocol for ranks that ended (a shared watcher would
// have to be told, reliably, never to kill a reaped rank's group). The cost is one sleeping
// process and one fd per rank in the launcher.
// Thread-safety: Announce is async-signal-safe (for the forked child of a multithreaded
// process); Start and Stop are not thread-safe.
#ifndef SHARDKIT_INTEGRATION_LAUNCH_RANK_WATCHER_H_
#define SHARDKIT_INTEGRATION_LAUNCH_RANK_WATCHER_H_

#include <sys/types.h>

#include "absl/status/status.h"

namespace shardkit::launch {

class RankWatcher {
 public:
  RankWatcher() = default;
  RankWatcher(RankWatcher&& other) noexcept;
  RankWatcher& operator=(RankWatcher&& other) noexcept;
  ~RankWatcher() { Stop(); }

  // Forks the watcher. Errors: kUnavailable if the pipe or the fork fails.
  [[nodiscard]] absl::Status Start();

  // In the rank's forked child, after setpgid(0, 0) and before exec: tells the watcher the
  // group to kill. Async-signal-safe; the write end it uses is close-on-exec.
  void Announce() const;

  // Kills and reaps the watcher, then closes the pipe, so the watcher does nothing. Call before
  // reaping the rank. No-op when not started.
  void Stop();

 private:
  pid_t pid_ = -1;
  int write_fd_ = -1;
};

}  // namespace shardkit::launch

#endif  // SHARDKIT_INTEGRATION_LAUNCH_RANK_WATCHER_H_
