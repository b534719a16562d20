#include "testing/internal/child_process.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace shardkit::testing::internal {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

bool WriteMessage(int fd, const std::string& message) {
  const uint32_t size = message.size();
  return os::WriteFully(fd, &size, sizeof(size)) == 0 &&
         os::WriteFully(fd, message.data(), message.size()) == 0;
}

std::optional<std::string> ReadMessage(int fd) {
  uint32_t size = 0;
  if (os::ReadFully(fd, &size, sizeof(size)) != 0) return std::nullopt;
  std::string message(size, '\0');
  if (os::ReadFully(fd, message.data(), size) != 0) return std::nullopt;
  return message;
}

std::string CaptureFailures(const std::function<void()>& fn) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
    fn();
  }
  std::string text;
  for (int i = 0; i < results.size(); ++i) {
    const ::testing::TestPartResult& r = results.GetTestPartResult(i);
    if (!r.failed()) continue;
    absl::StrAppend(&text, r.file_name() ? r.file_name() : "?", ":", r.line_number(), ": ",
                    r.message(), "\n");
  }
  return text;
}

absl::Status ChildGroup::Spawn(int rank, const std::function<int(int, int)>& body) {
  int down[2], up[2];
  if (pipe(down) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  if (pipe(up) != 0) {
    close(down[0]);
    close(down[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(120);  // the parent died before prctl took effect
    setpgid(0, pgid_);
    for (Child& c : children_) {  // other ranks' pipe ends
      CloseFd(c.to_child);
      CloseFd(c.from_child);
    }
    close(down[1]);
    close(up[0]);
    const int code = body(down[0], up[1]);
    _exit(code);
  }
  if (pgid_ == 0) pgid_ = pid;
  setpgid(pid, pgid_);  // also done by the child; whichever runs first wins the race
  close(down[0]);
  close(up[1]);
  Child child;
  child.rank = rank;
  child.pid = pid;
  child.to_child = down[1];
  child.from_child = up[0];
  children_.push_back(std::move(child));
  return absl::OkStatus();
}

void ChildGroup::Broadcast(const std::string& message) {
  for (Child& c : children_) {
    if (c.to_child >= 0 && !WriteMessage(c.to_child, message)) CloseFd(c.to_child);
  }
}

std::optional<std::string> ChildGroup::TakeFrame(std::string& pending) {
  uint32_t size = 0;
  if (pending.size() < sizeof(size)) return std::nullopt;
  std::memcpy(&size, pending.data(), sizeof(size));
  if (pending.size() < sizeof(size) + size) return std::nullopt;
  std::string message = pending.substr(sizeof(size), size);
  pending.erase(0, sizeof(size) + size);
  return message;
}

std::vector<std::optional<std::string>> ChildGroup::Collect(absl::Time deadline) {
  std::vector<std::optional<std::string>> result(children_.size());
  std::vector<bool> done(children_.size());
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i].timed_out = false;
    result[i] = TakeFrame(children_[i].pending);
    done[i] = result[i].has_value() || children_[i].from_child < 0;
  }
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> index;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (done[i]) continue;
      fds.push_back({children_[i].from_child, POLLIN, 0});
      index.push_back(i);
    }
    if (fds.empty()) return result;
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) {
      for (size_t i : index) children_[i].timed_out = true;
      return result;
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(wait_ms, 1000))) < 0 &&
        errno != EINTR) {
      return result;
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Child& c = children_[index[k]];
      char buffer[4096];
      const ssize_t n = read(c.from_child, buffer, sizeof(buffer));
      if (n <= 0 && !(n < 0 && errno == EINTR)) {
        CloseFd(c.from_child);
        done[index[k]] = true;
        continue;
      }
      if (n > 0) c.pending.append(buffer, n);
      result[index[k]] = TakeFrame(c.pending);
      done[index[k]] = result[index[k]].has_value();
    }
  }
}

void ChildGroup::Kill(size_t i) {
  Child& c = children_[i];
  if (!c.exit.finished && c.pid > 0) {
    kill(c.pid, SIGKILL);
    c.exit.killed = true;
  }
}

ChildGroup::Exit ChildGroup::Reap(size_t i, absl::Time deadline) {
  Child& c = children_[i];
  if (c.exit.finished || c.pid < 0) return c.exit;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) break;
    if (r < 0 && errno != EINTR) break;
    if (r == 0 && absl::Now() >= deadline) {
      Kill(i);
      while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    if (r == 0) usleep(2000);
  }
  c.exit.finished = true;
  if (WIFEXITED(status)) c.exit.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) c.exit.signal = WTERMSIG(status);
  CloseFd(c.to_child);
  CloseFd(c.from_child);
  return c.exit;
}

void ChildGroup::KillAll() {
  bool live = false;
  for (const Child& c : children_) live = live || !c.exit.finished;
  // Only while a member is unreaped: then the group id cannot have been reused.
  if (live && pgid_ > 0) kill(-pgid_, SIGKILL);
  for (size_t i = 0; i < children_.size(); ++i) {
    Kill(i);
    Reap(i);
  }
}

}  // namespace shardkit::testing::internal
