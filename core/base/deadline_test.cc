#include "core/base/deadline.h"

#include <limits>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardkit {
namespace {

TEST(PollTimeoutMs, PassedDeadlineIsZero) {
  EXPECT_EQ(PollTimeoutMs(absl::Now() - absl::Seconds(1)), 0);
  EXPECT_EQ(PollTimeoutMs(absl::InfinitePast()), 0);
}

TEST(PollTimeoutMs, RoundsUpSoAWaitNeverEndsEarly) {
  const int ms = PollTimeoutMs(absl::Now() + absl::Microseconds(1500));
  EXPECT_GE(ms, 1);
  EXPECT_LE(ms, 2);
  EXPECT_EQ(PollTimeoutMs(absl::Now() + absl::Microseconds(1)), 1);
}

TEST(PollTimeoutMs, FarDeadlinesSaturate) {
  EXPECT_EQ(PollTimeoutMs(absl::InfiniteFuture()), std::numeric_limits<int>::max());
  EXPECT_EQ(PollTimeoutMs(absl::Now() + absl::Hours(24 * 365)), std::numeric_limits<int>::max());
  const int ten_s = PollTimeoutMs(absl::Now() + absl::Seconds(10));
  EXPECT_GT(ten_s, 9000);
  EXPECT_LE(ten_s, 10000);
}

}  // namespace
}  // namespace shardkit
