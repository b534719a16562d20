#include "core/base/deadline.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/time/clock.h"

namespace shardkit {

int PollTimeoutMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
}

}  // namespace shardkit
