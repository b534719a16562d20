// Process plumbing for the multiprocess fixtures: forking ranks into one process group that dies
// with the test (PR_SET_PDEATHSIG), length-prefixed messages over pipes, reading with a deadline,
// and capturing a child's gtest failures as text. Internal to //testing.
#ifndef SHARDKIT_TESTING_INTERNAL_CHILD_PROCESS_H_
#define SHARDKIT_TESTING_INTERNAL_CHILD_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardkit::testing::internal {

// Writes one framed message; returns false on error. Safe in a forked child.
bool WriteMessage(int fd, const std::string& message);
// Blocks for one framed message; nullopt on EOF or error.
std::optional<std::string> ReadMessage(int fd);

// Runs `fn` with every gtest failure (from any thread) intercepted; returns the failures as
// "file:line: message" lines, empty if there were none.
std::string CaptureFailures(const std::function<void()>& fn);

// A set of forked children ("ranks") in one process group. Destroying it kills and reaps them
// all, so no child outlives it; children also die if the test process dies.
class ChildGroup {
 public:
  struct Exit {
    bool finished = false;  // reaped
    int code = -1;          // exit code, or -1
    int signal = 0;         // terminating signal, or 0
    bool killed = false;    // we killed it (deadline passed)
  };

  ChildGroup() = default;
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;
  ~ChildGroup() { KillAll(); }

  // Forks a child for `rank` running `body(from_parent_fd, to_parent_fd)`; the child exits with
  // body's return value (via _exit: no atexit handlers, no gtest teardown in the child).
  [[nodiscard]] absl::Status Spawn(int rank, const std::function<int(int, int)>& body);

  // Sends `message` to every live child.
  void Broadcast(const std::string& message);

  // Waits until every child has sent one message or closed its pipe, or `deadline` passes.
  // result[i] is child i's message (nullopt: EOF or deadline; see timed_out(i)).
  std::vector<std::optional<std::string>> Collect(absl::Time deadline);
  bool timed_out(size_t i) const { return children_[i].timed_out; }

  // Reaps child i, killing it if it has not exited by `deadline`; returns how it ended.
  Exit Reap(size_t i, absl::Time deadline = absl::InfinitePast());

  // SIGKILLs child i (reap it afterwards).
  void Kill(size_t i);

  // SIGKILLs the whole group and reaps every child. Idempotent.
  void KillAll();

  size_t size() const { return children_.size(); }
  int rank(size_t i) const { return children_[i].rank; }

 private:
  struct Child {
    int rank = -1;
    pid_t pid = -1;
    int to_child = -1;
    int from_child = -1;
    std::string pending;  // bytes of a partial message
    bool timed_out = false;
    Exit exit;
  };
  // Parses one complete frame out of `pending`, if any.
  static std::optional<std::string> TakeFrame(std::string& pending);

  pid_t pgid_ = 0;
  std::vector<Child> children_;
};

}  // namespace shardkit::testing::internal

#endif  // SHARDKIT_TESTING_INTERNAL_CHILD_PROCESS_H_
