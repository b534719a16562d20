// Deadlines as the waits below shardkit want them. Every operation carries an absolute deadline
// (absl::Time); poll(2), Gloo's waits and friends take a relative timeout in milliseconds.
//
//   const int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs(deadline));
#ifndef SHARDKIT_CORE_BASE_DEADLINE_H_
#define SHARDKIT_CORE_BASE_DEADLINE_H_

#include "absl/time/time.h"

namespace shardkit {

// Milliseconds from now until `deadline`, rounded up (a wait never ends before the deadline),
// at least 0 (a deadline that has passed) and at most INT_MAX (absl::InfiniteFuture()).
int PollTimeoutMs(absl::Time deadline);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_DEADLINE_H_
