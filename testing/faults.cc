#include "testing/faults.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/os/proc_status.h"
#include "core/tensor/allocator.h"

namespace shardkit::testing {

int64_t BytesWritten() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "wchar:") return value;
  }
  return -1;
}

WriteTrigger::WriteTrigger(int64_t bytes, std::function<void()> action,
                           std::function<int64_t()> written) {
  const int64_t start = written();
  watcher_ =
      std::thread([this, start, bytes, action = std::move(action), written = std::move(written)] {
        while (!stop_.load()) {
          if (start >= 0 && written() - start >= bytes) {
            fired_ = true;
            action();
            return;
          }
          usleep(100);
        }
      });
}

WriteTrigger::~WriteTrigger() {
  stop_ = true;
  watcher_.join();
}

int ShutdownTcpConnections() {
  int count = 0;
  (void)os::ForEachOpenFd([&](int fd) {  // unlisted: none shut down
    int type = 0;
    socklen_t type_size = sizeof(type);
    sockaddr_storage address{};
    socklen_t address_size = sizeof(address);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0 || type != SOCK_STREAM ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &address_size) != 0 ||
        (address.ss_family != AF_INET && address.ss_family != AF_INET6)) {
      return;
    }
    if (shutdown(fd, SHUT_RDWR) == 0) ++count;
  });
  return count;
}

void StallFor(absl::Duration duration) {
  const pid_t self = getpid();
  const timespec pause = absl::ToTimespec(duration);
  const pid_t helper = fork();
  if (helper == 0) {
    // Only async-signal-safe calls in the child of a multithreaded process.
    nanosleep(&pause, nullptr);
    kill(self, SIGCONT);
    _exit(0);
  }
  if (helper < 0) return;
  raise(SIGSTOP);
  while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
  }
}

static_assert(std::atomic<int64_t>::is_always_lock_free, "shared between processes");

SharedTime::SharedTime() {
  void* page = mmap(nullptr, sizeof(std::atomic<int64_t>), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    std::perror("SharedTime: mmap");
    std::abort();
  }
  nanos_ = new (page) std::atomic<int64_t>(0);
}

SharedTime::~SharedTime() { munmap(nanos_, sizeof(*nanos_)); }

void SharedTime::Stamp() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t nanos = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  int64_t seen = nanos_->load();
  while (seen < nanos && !nanos_->compare_exchange_weak(seen, nanos)) {
  }
}

std::optional<absl::Time> SharedTime::Get() const {
  const int64_t nanos = nanos_->load();
  if (nanos == 0) return std::nullopt;
  return absl::FromUnixNanos(nanos);
}

std::optional<absl::Time> SharedTime::Await(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Get().has_value() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return Get();
}

namespace {

// The CPU allocator while an AllocationFault is alive: forwards to the allocator registered
// before, except for the one allocation it fails. Never destroyed, so that memory it handed out
// can be freed through it after the fault is gone.
class FailingCpuAllocator final : public Allocator {
 public:
  void Arm(Allocator* inner, int skip) {
    if (inner == this) {
      std::fprintf(stderr, "AllocationFault: one at a time per process\n");
      std::abort();
    }
    inner_ = inner;
    skip_ = skip;
    fired_ = false;
    armed_ = true;
  }
  Allocator* Disarm() {
    armed_ = false;
    return inner_.load();
  }
  bool fired() const { return fired_.load(); }

  absl::StatusOr<void*> Allocate(const Device& device, size_t nbytes) override {
    if (nbytes > 0 && armed_.load() && !fired_.load() && skip_.fetch_sub(1) <= 0) {
      fired_ = true;
      return absl::ResourceExhaustedError(
          absl::StrCat("out of CPU memory allocating ", nbytes, " bytes (injected)"));
    }
    return inner_.load()->Allocate(device, nbytes);
  }
  void Deallocate(const Device& device, void* ptr, size_t nbytes) override {
    inner_.load()->Deallocate(device, ptr, nbytes);
  }
  absl::Status Copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
                    size_t nbytes) override {
    return inner_.load()->Copy(dst, dst_device, src, src_device, nbytes);
  }
  absl::Status Zero(const Device& device, void* ptr, size_t nbytes) override {
    return inner_.load()->Zero(device, ptr, nbytes);
  }

 private:
  std::atomic<Allocator*> inner_{nullptr};
  std::atomic<int> skip_{0};
  std::atomic<bool> armed_{false};
  std::atomic<bool> fired_{false};
};

FailingCpuAllocator& FailingCpu() {
  static FailingCpuAllocator* allocator = new FailingCpuAllocator();  // never destroyed
  return *allocator;
}

}  // namespace

AllocationFault::AllocationFault(int skip) {
  absl::StatusOr<Allocator*> current = GetAllocator(Device::Cpu());
  if (!current.ok()) {
    std::fprintf(stderr, "AllocationFault: %s\n", current.status().ToString().c_str());
    std::abort();
  }
  FailingCpu().Arm(*current, skip);
  RegisterAllocator(DeviceType::kCpu, &FailingCpu());
}

AllocationFault::~AllocationFault() { RegisterAllocator(DeviceType::kCpu, FailingCpu().Disarm()); }

bool AllocationFault::fired() const { return FailingCpu().fired(); }

std::vector<pid_t> ChildProcesses(pid_t pid) {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t candidate = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &candidate)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // gone meanwhile
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses; parse after the last
    // ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    pid_t parent = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &parent) == 2 && parent == pid) {
      children.push_back(candidate);
    }
  }
  return children;
}

}  // namespace shardkit::testing
