// Fault injection for multiprocess tests, without hooks in production code: a rank acts on itself
// when it has written a given number of bytes (so "mid-transfer" is a byte count, not a guess at
// timing), drops its TCP connections while living on, stalls (SIGSTOP) for a while, or runs out
// of CPU memory at a given allocation (through the allocator registry, core/tensor/allocator.h).
//
//   // On the source rank: die once 16 MiB of the parameter have left this process.
//   WriteTrigger die(16 << 20, [] { raise(SIGKILL); });
//   absl::Status status = ShardParameter(module, "w", spec, comm, options);
//
// Bytes written are /proc/self/io's wchar: every write(2)/writev(2) of the process, to sockets
// (Gloo's sends) and files alike. Linux only.
#ifndef SHARDKIT_TESTING_FAULTS_H_
#define SHARDKIT_TESTING_FAULTS_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace shardkit::testing {

// Bytes this process has written so far (wchar of /proc/self/io), or -1 if unavailable.
int64_t BytesWritten();

// Runs `action` on a watcher thread once this process has written `bytes` more than when the
// trigger was made (checked every 100 µs). Destruction stops the watcher; an action that has
// started is waited for. Not copyable. `written` counts the bytes: BytesWritten by default; a
// transport that moves bytes without write(2) (UCX's shared memory: the peer reads them) counts
// with the communicator's payload counters instead (SentBytes).
class WriteTrigger {
 public:
  WriteTrigger(int64_t bytes, std::function<void()> action,
               std::function<int64_t()> written = &BytesWritten);
  WriteTrigger(const WriteTrigger&) = delete;
  WriteTrigger& operator=(const WriteTrigger&) = delete;
  ~WriteTrigger();

  // Whether the action has run (or is running).
  bool fired() const { return fired_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> fired_{false};
  std::thread watcher_;
};

// Shuts down (SHUT_RDWR) every TCP socket of this process: peers see the connections close as if
// the network had dropped them, while this process lives on. Returns how many were shut down.
int ShutdownTcpConnections();

// Stops this whole process (SIGSTOP) and has a helper process continue it (SIGCONT) after
// `duration`; returns once continued, the helper reaped. Safe to call from any thread.
void StallFor(absl::Duration duration);

// A moment shared by this process and the processes it forks afterwards (one MAP_SHARED page), so
// that a victim can stamp when it acts on itself and its peers measure how long they took to
// notice, whatever the operation did before (a kill late in a transfer comes after seconds of
// work on a loaded machine). The latest stamp wins, so ranks can also stamp when each starts and
// read when the last one did. Create it before forking the ranks.
//
//   SharedTime died;                                  // before RunRanks
//   died.Stamp(); raise(SIGKILL);                     // the victim
//   EXPECT_LT(absl::Now() - *died.Get(), limit);      // a survivor, once its call failed
class SharedTime {
 public:
  SharedTime();
  SharedTime(const SharedTime&) = delete;
  SharedTime& operator=(const SharedTime&) = delete;
  ~SharedTime();

  // Records absl::Now() unless a later time was stamped, for every process that shares the page.
  // Async-signal-safe.
  void Stamp();
  // The latest time stamped, or nullopt before any Stamp.
  std::optional<absl::Time> Get() const;
  // Waits (polling every millisecond) until a time is stamped or `timeout` passes; what Get
  // returns then. To order ranks without guessing at sleeps.
  std::optional<absl::Time> Await(absl::Duration timeout = absl::Seconds(10)) const;

 private:
  std::atomic<int64_t>* nanos_;  // since the Unix epoch; 0: not stamped
};

// While alive, the CPU allocator of this process fails one allocation: the first of one byte or
// more after `skip` such allocations since construction returns kResourceExhausted ("out of CPU
// memory allocating N bytes (injected)"); every other call goes to the allocator that was
// registered before, which destruction registers again. Memory allocated meanwhile may outlive
// the fault. Counts only Storage allocations (tensors, engine buffers), not malloc. One at a
// time per process; construct and destroy on one thread.
//
//   AllocationFault fault(/*skip=*/1);  // the second allocation of this rank fails
//   absl::StatusOr<ShardedTensor> moved = Reshard(st, spec, comm);
class AllocationFault {
 public:
  explicit AllocationFault(int skip = 0);
  AllocationFault(const AllocationFault&) = delete;
  AllocationFault& operator=(const AllocationFault&) = delete;
  ~AllocationFault();

  // Whether the allocation has failed yet.
  bool fired() const;
};

// The processes whose parent is `pid` (from /proc), e.g. to check that a test left none behind.
std::vector<pid_t> ChildProcesses(pid_t pid);

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_FAULTS_H_
