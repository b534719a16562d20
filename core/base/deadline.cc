#include "core/base/deadline.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <thread>

#include "absl/time/clock.h"

namespace shardkit {

int PollTimeoutMs(absl::Time deadline) { return PollTimeoutMs(deadline, absl::Now()); }

int PollTimeoutMs(absl::Time deadline, absl::Time now) {
  const absl::Duration left = deadline - now;
  if (left <= absl::ZeroDuration()) return 0;
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
}

void PollBackoff::Pause() {
  if (pause_ < absl::Microseconds(50)) {
    std::this_thread::yield();
  } else {
    absl::SleepFor(pause_);
  }
  pause_ = std::min(pause_ * 2, absl::Milliseconds(1));
}

}  // namespace shardkit
