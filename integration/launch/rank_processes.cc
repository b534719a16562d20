#include "integration/launch/rank_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/os/fd.h"
#include "integration/launch/error_lines.h"
#include "integration/launch/line_prefixer.h"
#include "integration/launch/rank_watcher.h"

namespace shardkit::launch {
namespace {

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};
// After the last rank ended, how long to wait for its pipes to reach end of file (a process
// that left the rank's process group may still hold them).
constexpr absl::Duration kDrainAfterExit = absl::Seconds(1);

int signal_pipe_write = -1;  // the self-pipe the handler writes signal numbers to

void OnSignal(int signal) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(signal);
  (void)!::write(signal_pipe_write, &byte, 1);
  errno = saved;
}

void WriteAll(int fd, std::string_view data) {
  // An error (e.g. EPIPE: the reader went away) is ignored: the ranks keep running.
  (void)os::WriteFully(fd, data.data(), data.size());
}

// Installs OnSignal for SIGCHLD and the forwarded signals; restores the old handlers on exit.
class SignalPipe {
 public:
  SignalPipe() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return;
    signal_pipe_write = fds_[1];
    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < kCount; ++i) ::sigaction(Signal(i), &action, &old_[i]);
  }
  ~SignalPipe() {
    if (fds_[0] < 0) return;
    for (int i = 0; i < kCount; ++i) ::sigaction(Signal(i), &old_[i], nullptr);
    signal_pipe_write = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  bool ok() const { return fds_[0] >= 0; }
  int read_fd() const { return fds_[0]; }

 private:
  static constexpr int kCount = 4;
  static int Signal(int i) { return i == 0 ? SIGCHLD : kForwardedSignals[i - 1]; }
  int fds_[2] = {-1, -1};
  struct sigaction old_[kCount];
};

struct Stream {
  int fd = -1;  // read end of the rank's pipe; -1 once at end of file
  int out_fd = -1;
  std::optional<LinePrefixer> prefixer;
  int rank = 0;
  bool error_lines = false;  // a stderr stream that goes through ErrorLines
};

struct Rank {
  RankOutcome outcome;
  pid_t pid = -1;  // also the process group id; -1 once reaped
  Stream streams[2];
  RankWatcher watcher;  // kills the group if the launcher dies first; stopped before reaping
};

class Supervisor {
 public:
  Supervisor(const RunOptions& options, int signal_fd) : options_(options), signal_fd_(signal_fd) {
    if (!options.error_prefix.empty()) errors_.emplace(options.error_prefix, options.error_hold);
  }
  absl::StatusOr<RunOutcome> Run(const std::vector<RankProcessSpec>& specs);

 private:
  absl::Status Spawn(const RankProcessSpec& spec, Rank& rank);
  void ReapExited();
  void Record(Rank& rank, int status);
  void SignalRunning(int signal, bool mark_stopped);
  void HandleDeadlines();
  void PollOnce();
  void ReadStream(Stream& stream);
  void Emit(Stream& stream, const std::string& text);
  void CloseStream(Stream& stream);
  void ReadSignals();
  bool AnyRunning() const;
  bool AnyStreamOpen() const;

  const RunOptions& options_;
  int signal_fd_;
  std::vector<Rank> ranks_;
  int launcher_signal_ = 0;
  std::optional<absl::Time> grace_deadline_, kill_deadline_, drain_deadline_;
  std::vector<int> first_failed_;
  std::optional<ErrorLines> errors_;  // with RunOptions::error_prefix
};

absl::Status Supervisor::Spawn(const RankProcessSpec& spec, Rank& rank) {
  // Before the rank exists, so that no moment passes with the rank running unwatched.
  if (absl::Status started = rank.watcher.Start(); !started.ok()) return started;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return absl::UnavailableError("pipe failed");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return absl::UnavailableError("pipe failed");
  }
  std::vector<std::string> args = options_.command, env = spec.env;
  std::vector<char*> argv, envp;
  for (std::string& arg : args) argv.push_back(arg.data());
  for (std::string& var : env) envp.push_back(var.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string exec_error = absl::StrCat("shardkit launch: cannot run \"", args[0], "\": ");
  pid_t pid = ::fork();
  const int fork_errno = errno;
  if (pid == 0) {
    ::setpgid(0, 0);
    rank.watcher.Announce();
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    for (int signal : {SIGPIPE, SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::signal(signal, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    int exec_errno = errno;
    WriteAll(2, exec_error);
    WriteAll(2, absl::StrCat(std::strerror(exec_errno), "\n"));
    ::_exit(exec_errno == ENOENT ? 127 : 126);
  }
  ::close(out[1]);
  ::close(err[1]);
  rank.outcome.rank = spec.rank;
  const std::string prefix = RankLinePrefix(spec.rank);
  int read_fds[2] = {out[0], err[0]};
  int out_fds[2] = {options_.stdout_fd, options_.stderr_fd};
  for (int i = 0; i < 2; ++i) {
    rank.streams[i].fd = read_fds[i];
    rank.streams[i].out_fd = out_fds[i];
    rank.streams[i].prefixer.emplace(i == 0 && !options_.prefix_stdout ? "" : prefix);
    rank.streams[i].rank = spec.rank;
    rank.streams[i].error_lines = i == 1 && errors_.has_value();
    ::fcntl(read_fds[i], F_SETFL, O_NONBLOCK);
  }
  if (pid < 0) {
    for (Stream& stream : rank.streams) CloseStream(stream);
    return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also in the child: whichever runs first wins, no race with kill
  rank.pid = pid;
  return absl::OkStatus();
}

void Supervisor::Record(Rank& rank, int status) {
  RankOutcome& outcome = rank.outcome;
  outcome.signaled = WIFSIGNALED(status);
  outcome.code = outcome.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  rank.pid = -1;
  if (!outcome.failed()) return;
  // With ErrorLines, an exit with a code is reported at the end, by the rank's error line.
  if (!errors_.has_value() || outcome.signaled) {
    WriteAll(options_.stderr_fd, FailureLine(outcome) + "\n");
  }
  if (first_failed_.empty()) grace_deadline_ = absl::Now() + options_.grace;
  first_failed_.push_back(outcome.rank);
}

void Supervisor::ReapExited() {
  for (Rank& rank : ranks_) {
    if (rank.pid < 0) continue;
    siginfo_t info{};
    // WNOWAIT keeps the rank a zombie, so its pid (= its group id) cannot be reused while we
    // kill what is left of its group.
    if (::waitid(P_PID, rank.pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) continue;
    if (info.si_pid != rank.pid) continue;
    ::kill(-rank.pid, SIGKILL);
    rank.watcher.Stop();  // while the zombie rank still holds its group id: no reuse yet
    int status = 0;
    while (::waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
    }
    Record(rank, status);
  }
}

void Supervisor::SignalRunning(int signal, bool mark_stopped) {
  for (Rank& rank : ranks_) {
    if (rank.pid < 0) continue;
    ::kill(-rank.pid, signal);
    if (mark_stopped) rank.outcome.stopped = true;
  }
  if (mark_stopped && !kill_deadline_.has_value()) {
    kill_deadline_ = absl::Now() + options_.term_to_kill;
  }
}

void Supervisor::HandleDeadlines() {
  const absl::Time now = absl::Now();
  if (grace_deadline_.has_value() && now >= *grace_deadline_) {
    grace_deadline_.reset();
    std::vector<int> running;
    for (const Rank& rank : ranks_) {
      if (rank.pid >= 0 && !rank.outcome.stopped) running.push_back(rank.outcome.rank);
    }
    if (!running.empty()) {
      WriteAll(options_.stderr_fd,
               absl::StrCat("shardkit launch: stopping rank(s) ", absl::StrJoin(running, ", "),
                            ": still running ", absl::FormatDuration(options_.grace),
                            " (--grace) after rank ", first_failed_.front(), " failed\n"));
      SignalRunning(SIGTERM, /*mark_stopped=*/true);
    }
  }
  if (kill_deadline_.has_value() && now >= *kill_deadline_) {
    kill_deadline_.reset();
    SignalRunning(SIGKILL, /*mark_stopped=*/false);
  }
}

void Supervisor::ReadSignals() {
  unsigned char buffer[64];
  ssize_t n;
  while ((n = ::read(signal_fd_, buffer, sizeof(buffer))) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] == SIGCHLD) continue;  // reaping happens on every loop iteration
      if (launcher_signal_ == 0) launcher_signal_ = buffer[i];
      SignalRunning(buffer[i], /*mark_stopped=*/true);
    }
  }
}

void Supervisor::Emit(Stream& stream, const std::string& text) {
  if (text.empty()) return;
  WriteAll(stream.out_fd,
           stream.error_lines ? errors_->Feed(stream.rank, text, absl::Now()) : text);
}

void Supervisor::CloseStream(Stream& stream) {
  if (stream.fd < 0) return;
  ::close(stream.fd);
  stream.fd = -1;
  Emit(stream, stream.prefixer->Flush());
  if (stream.error_lines) errors_->StreamEnded(stream.rank);
}

void Supervisor::ReadStream(Stream& stream) {
  char buffer[1 << 16];
  ssize_t n = ::read(stream.fd, buffer, sizeof(buffer));
  if (n > 0) {
    Emit(stream, stream.prefixer->Feed(std::string_view(buffer, n)));
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    CloseStream(stream);
  }
}

void Supervisor::PollOnce() {
  std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}};
  std::vector<Stream*> streams = {nullptr};
  for (Rank& rank : ranks_) {
    for (Stream& stream : rank.streams) {
      if (stream.fd < 0) continue;
      fds.push_back({stream.fd, POLLIN, 0});
      streams.push_back(&stream);
    }
  }
  absl::Duration wait = absl::Milliseconds(50);  // also the reaping interval
  const std::optional<absl::Time> held_until =
      errors_.has_value() ? errors_->NextDue() : std::nullopt;
  for (const auto& deadline : {grace_deadline_, kill_deadline_, drain_deadline_, held_until}) {
    if (deadline.has_value()) wait = std::min(wait, *deadline - absl::Now());
  }
  int timeout_ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(wait)));
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  if (fds[0].revents != 0) ReadSignals();
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) ReadStream(*streams[i]);
  }
}

bool Supervisor::AnyRunning() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.pid >= 0; });
}

bool Supervisor::AnyStreamOpen() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](const Rank& r) { return r.streams[0].fd >= 0 || r.streams[1].fd >= 0; });
}

absl::StatusOr<RunOutcome> Supervisor::Run(const std::vector<RankProcessSpec>& specs) {
  ranks_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::Status spawned = Spawn(specs[i], ranks_[i]);
    if (!spawned.ok()) {
      SignalRunning(SIGKILL, /*mark_stopped=*/true);
      for (Rank& rank : ranks_) {
        rank.watcher.Stop();  // also that of the rank that failed to start
        if (rank.pid >= 0) ::waitpid(rank.pid, nullptr, 0);
        for (Stream& stream : rank.streams) CloseStream(stream);
      }
      return spawned;
    }
  }
  while (true) {
    ReapExited();
    HandleDeadlines();
    if (errors_.has_value()) WriteAll(options_.stderr_fd, errors_->ReleaseDue(absl::Now()));
    if (!AnyRunning()) {
      if (!drain_deadline_.has_value()) drain_deadline_ = absl::Now() + kDrainAfterExit;
      if (!AnyStreamOpen() || absl::Now() >= *drain_deadline_) break;
    }
    PollOnce();
  }
  RunOutcome outcome;
  for (Rank& rank : ranks_) {
    for (Stream& stream : rank.streams) CloseStream(stream);
    outcome.ranks.push_back(rank.outcome);
  }
  if (errors_.has_value()) WriteAll(options_.stderr_fd, errors_->Finish(outcome.ranks));
  outcome.launcher_signal = launcher_signal_;
  return outcome;
}

}  // namespace

absl::StatusOr<RunOutcome> RunRankProcesses(const RunOptions& options,
                                            const std::vector<RankProcessSpec>& specs) {
  if (options.command.empty()) return absl::InvalidArgumentError("no command to run");
  SignalPipe signal_pipe;
  if (!signal_pipe.ok()) return absl::UnavailableError("cannot create the signal pipe");
  Supervisor supervisor(options, signal_pipe.read_fd());
  return supervisor.Run(specs);
}

std::string FailureLine(const RankOutcome& rank) {
  return rank.signaled
             ? absl::StrCat("shardkit launch: rank ", rank.rank, " killed by signal ", rank.code)
             : absl::StrCat("shardkit launch: rank ", rank.rank, " exited with code ", rank.code);
}

int LaunchExitCode(const RunOutcome& outcome) {
  const RankOutcome* lowest = nullptr;
  for (const RankOutcome& rank : outcome.ranks) {
    if (rank.failed() && (lowest == nullptr || rank.rank < lowest->rank)) lowest = &rank;
  }
  if (lowest != nullptr) return lowest->signaled ? 128 + lowest->code : lowest->code;
  return outcome.launcher_signal != 0 ? 128 + outcome.launcher_signal : 0;
}

}  // namespace shardkit::launch
