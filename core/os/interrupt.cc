#include "core/os/interrupt.h"

#include <limits.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"

namespace shardkit::os {
namespace {

enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };

// One registered path. `kind`, `order` and `path` are written while the slot is kClaimed and read
// by the handler only once it is kLive (release/acquire on `state`).
struct Slot {
  std::atomic<int> state{kFree};
  CleanupKind kind = CleanupKind::kTemporaryFile;
  uint64_t order = 0;  // registration order: directories are removed the latest first
  char path[PATH_MAX];
};

Slot slots[kInterruptSlots];
std::atomic<uint64_t> next_order{1};
std::atomic<bool> interrupted{false};
std::atomic<int> in_flight{0};  // registrations between their interrupted check and create's end

std::atomic<const InterruptReport*> current_report{nullptr};
std::mutex reports_mutex;
std::deque<InterruptReport>* reports = nullptr;  // every report ever set; never freed

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void SleepMs(int ms) {
  struct timespec delay {
    0, static_cast<long>(ms) * 1000000L
  };
  while (::nanosleep(&delay, &delay) != 0 && errno == EINTR) {
  }
}

int ClaimSlot() {
  for (int i = 0; i < kInterruptSlots; ++i) {
    int expected = kFree;
    if (slots[i].state.compare_exchange_strong(expected, kClaimed)) return i;
  }
  return -1;
}

// A line assembled without allocating: the handler's output.
class Line {
 public:
  void Add(const char* text) {
    while (*text != '\0' && size_ < sizeof(buffer_) - 1) buffer_[size_++] = *text++;
  }
  void Add(uint64_t n) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + n % 10);
      n /= 10;
    } while (n > 0);
    while (k > 0 && size_ < sizeof(buffer_) - 1) buffer_[size_++] = digits[--k];
  }
  void Count(uint64_t n, const char* what) {
    Add(n);
    Add(" ");
    Add(what);
    if (n != 1) Add("s");
  }
  void WriteTo(int fd) {
    buffer_[size_++] = '\n';
    (void)WriteFully(fd, buffer_, size_);  // async-signal-safe
  }

 private:
  char buffer_[8192];
  size_t size_ = 0;
};

const char* SignalName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal";
  }
}

struct Removed {
  uint64_t temporary = 0, output = 0;
  bool directory = false;
};

// Every live file slot unlinked (counted when it existed), then every live directory slot, the
// latest registered first.
Removed RemoveRegistered() {
  Removed removed;
  // Temporary files first: a rename into place that another thread completes after this pass
  // has its file removed by the next one; one it attempts later fails.
  for (const bool temporaries : {true, false}) {
    for (Slot& slot : slots) {
      if (slot.state.load(std::memory_order_acquire) != kLive ||
          slot.kind == CleanupKind::kDirectory ||
          (slot.kind == CleanupKind::kTemporaryFile) != temporaries || ::unlink(slot.path) != 0) {
        continue;
      }
      if (slot.kind == CleanupKind::kTemporaryFile) ++removed.temporary;
      if (slot.kind == CleanupKind::kOutputFile) ++removed.output;
    }
  }
  uint64_t below = UINT64_MAX;  // directories with a smaller order are left
  while (true) {
    Slot* latest = nullptr;
    for (Slot& slot : slots) {
      if (slot.state.load(std::memory_order_acquire) == kLive &&
          slot.kind == CleanupKind::kDirectory && slot.order < below &&
          (latest == nullptr || slot.order > latest->order)) {
        latest = &slot;
      }
    }
    if (latest == nullptr) break;
    below = latest->order;
    if (!RemoveEmptyDirectory(latest->path, kDirectorySettleMs)) break;  // its parents hold it
    removed.directory = true;
  }
  return removed;
}

// The report's state for what the handler found and removed (InterruptReport's order).
const std::string& State(const InterruptReport& report, bool probe_present,
                         const Removed& removed) {
  if (removed.directory) return report.state_if_removed;
  if (removed.output > 0 && !report.state_if_outputs_removed.empty()) {
    return report.state_if_outputs_removed;
  }
  if (probe_present) return report.state_if_probe_present;
  return report.state;
}

void Report(int signal, const InterruptReport& report, bool probe_present, const Removed& removed) {
  Line line;
  line.Add(report.program.c_str());
  line.Add(": interrupted (");
  line.Add(SignalName(signal));
  line.Add("): removed ");
  line.Count(removed.temporary, "temporary file");
  if (removed.output > 0) {
    line.Add(" and ");
    line.Count(removed.output, "written file");
  }
  if (!report.scope.empty()) {
    line.Add(" ");
    line.Add(report.scope.c_str());
  }
  line.Add("; ");
  line.Add(State(report, probe_present, removed).c_str());
  line.WriteTo(STDERR_FILENO);
}

void OnInterrupt(int signal) {
  const int saved_errno = errno;
  if (interrupted.exchange(true)) {  // another thread handles an interrupt: the process dies
    errno = saved_errno;
    return;
  }
  for (int waited = 0; in_flight.load() > 0 && waited < kInFlightWaitMs; ++waited) SleepMs(1);
  const InterruptReport* report = current_report.load(std::memory_order_acquire);
  const bool probe_present =
      report != nullptr && !report->probe.empty() && ::access(report->probe.c_str(), F_OK) == 0;
  const Removed removed = RemoveRegistered();
  if (report != nullptr) Report(signal, *report, probe_present, removed);
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
  ::raise(signal);  // delivered, with the default action, once this handler returns
  errno = saved_errno;
}

}  // namespace

InterruptCleanup::InterruptCleanup(InterruptCleanup&& other) noexcept
    : slot_(std::exchange(other.slot_, -1)) {}

InterruptCleanup& InterruptCleanup::operator=(InterruptCleanup&& other) noexcept {
  if (this != &other) {
    Release();
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

void InterruptCleanup::Release() {
  if (slot_ < 0) return;
  slots[slot_].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

absl::StatusOr<InterruptCleanup> InterruptCleanup::Register(
    const std::string& path, CleanupKind kind, absl::FunctionRef<absl::Status()> create) {
  // Dekker-style with the handler: we count ourselves in flight, then look at `interrupted`; the
  // handler sets it, then waits for `in_flight` to drop. Either we see the interrupt, or the
  // handler sees our slot live once `create` is done.
  in_flight.fetch_add(1);
  if (interrupted.load()) {
    in_flight.fetch_sub(1);
    return absl::CancelledError(absl::StrCat(path, ": not created: the process is interrupted"));
  }
  const int slot = path.size() < PATH_MAX ? ClaimSlot() : -1;
  if (slot >= 0) {
    Slot& s = slots[slot];
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.kind = kind;
    s.order = next_order.fetch_add(1);
    s.state.store(kLive, std::memory_order_release);
  }
  InterruptCleanup registration(slot);
  absl::Status created = create();
  in_flight.fetch_sub(1);
  if (!created.ok()) return created;  // `registration` releases the slot
  return registration;
}

InterruptCleanup InterruptCleanup::Register(const std::string& path, CleanupKind kind) {
  absl::StatusOr<InterruptCleanup> registration =
      Register(path, kind, [] { return absl::OkStatus(); });
  return registration.ok() ? *std::move(registration) : InterruptCleanup();
}

void ScopedInterruptReport::Set(InterruptReport report) {
  std::lock_guard<std::mutex> lock(reports_mutex);
  if (reports == nullptr) reports = new std::deque<InterruptReport>();
  reports->push_back(std::move(report));  // earlier elements stay where they are
  mine_ = &reports->back();
  current_report.store(mine_, std::memory_order_release);
}

ScopedInterruptReport::~ScopedInterruptReport() {
  if (mine_ == nullptr) return;
  std::lock_guard<std::mutex> lock(reports_mutex);
  const InterruptReport* mine = mine_;
  current_report.compare_exchange_strong(mine, nullptr);  // unless another report replaced it
}

void InstallInterruptHandlers() {
  for (const int signal : kSignals) {
    struct sigaction old {};
    if (::sigaction(signal, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    for (const int other : kSignals) sigaddset(&action.sa_mask, other);
    ::sigaction(signal, &action, nullptr);
  }
}

bool RemoveEmptyDirectory(const char* path, int settle_ms) {
  for (int waited = 0;; waited += 10) {
    if (::rmdir(path) == 0) return true;
    if ((errno != ENOTEMPTY && errno != EEXIST) || waited >= settle_ms) return false;
    SleepMs(10);
  }
}

}  // namespace shardkit::os
