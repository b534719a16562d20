#include "integration/launch/rank_watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"

namespace shardkit::launch {
namespace {

// Where close_range(2) is missing (Linux < 5.9), fds are closed one by one up to this bound.
int FdBound() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 16;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20));
}

// Makes `fd` the watcher's fd 0 and closes every other one: a watcher holding the write end of
// a rank's output pipe would delay the launcher's end of file on it, one holding another
// watcher's pipe would keep that watcher from seeing the launcher die.
void KeepOnly(int fd, int fd_bound) {
  ::dup2(fd, 0);
  if (::close_range(1, ~0U, 0) == 0) return;
  for (int other = 1; other < fd_bound; ++other) ::close(other);
}

// The watcher's whole life; only async-signal-safe calls, as the launcher may have threads.
[[noreturn]] void Watch(int read_fd, int fd_bound) {
  // A process group of its own: `kill -KILL -<launcher's group>` or Ctrl-C must not take the
  // watcher down with the launcher. Blocked signals: only SIGKILL (from the launcher's Stop)
  // ends it otherwise.
  ::setpgid(0, 0);
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  KeepOnly(read_fd, fd_bound);
  pid_t rank = 0;
  const int err = os::ReadFully(0, &rank, sizeof(rank));  // async-signal-safe
  if (err == os::kNoBytes) ::_exit(0);                    // the rank never started: nothing to kill
  if (err != 0) ::_exit(1);
  char byte;
  ssize_t n;
  while ((n = ::read(0, &byte, 1)) != 0) {
    if (n < 0 && errno != EINTR) ::_exit(1);
  }
  // End of file: the launcher is gone without having stopped this watcher.
  if (rank > 0) ::kill(-rank, SIGKILL);
  ::_exit(0);
}

}  // namespace

RankWatcher::RankWatcher(RankWatcher&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), write_fd_(std::exchange(other.write_fd_, -1)) {}

RankWatcher& RankWatcher::operator=(RankWatcher&& other) noexcept {
  if (this != &other) {
    Stop();
    pid_ = std::exchange(other.pid_, -1);
    write_fd_ = std::exchange(other.write_fd_, -1);
  }
  return *this;
}

absl::Status RankWatcher::Start() {
  Stop();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe failed: ", std::strerror(errno)));
  }
  const int fd_bound = FdBound();
  const pid_t pid = ::fork();
  if (pid == 0) Watch(fds[0], fd_bound);
  const int fork_errno = errno;
  ::close(fds[0]);
  if (pid < 0) {
    ::close(fds[1]);
    return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also in the watcher: whichever runs first wins
  pid_ = pid;
  write_fd_ = fds[1];
  return absl::OkStatus();
}

void RankWatcher::Announce() const {
  const pid_t self = ::getpid();
  // 4 bytes into an empty pipe: written at once, never blocks.
  (void)!::write(write_fd_, &self, sizeof(self));
}

void RankWatcher::Stop() {
  if (pid_ < 0) return;
  // SIGKILL rather than a message: it works even if the watcher was stopped (SIGSTOP), so
  // Stop cannot hang; and pid_ is an unreaped child of ours, so it names no other process.
  // Killed before the pipe is closed, the watcher never sees end of file.
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  ::close(write_fd_);
  pid_ = -1;
  write_fd_ = -1;
}

}  // namespace shardkit::launch
