// Deadlines as the waits below shardkit want them. Every operation carries an absolute deadline
// (absl::Time); poll(2), Gloo's waits and friends take a relative timeout in milliseconds, and
// polling loops pause between polls.
//
//   const int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs(deadline));
#ifndef SHARDKIT_CORE_BASE_DEADLINE_H_
#define SHARDKIT_CORE_BASE_DEADLINE_H_

#include "absl/time/time.h"

namespace shardkit {

// Pauses between the polls of a wait that has no blocking form with a deadline (MPI_Test*,
// NCCL's asynchronous state, cudaStreamQuery): yields at first, then sleeps, doubling up to 1 ms,
// so a fast operation costs microseconds and a slow one little CPU. One per wait.
//
//   PollBackoff backoff;
//   while (!Done()) { if (absl::Now() >= deadline) return …; backoff.Pause(); }
class PollBackoff {
 public:
  void Pause();

 private:
  absl::Duration pause_ = absl::Microseconds(1);
};

// Milliseconds from now until `deadline`, rounded up (a wait never ends before the deadline),
// at least 0 (a deadline that has passed) and at most INT_MAX (absl::InfiniteFuture()).
int PollTimeoutMs(absl::Time deadline);
// The same, from `now` instead of absl::Now().
int PollTimeoutMs(absl::Time deadline, absl::Time now);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_DEADLINE_H_
