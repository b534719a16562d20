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
  // From a fixed now (absl::Now() twice could be a preemption apart).
  const absl::Time now = absl::Now();
  EXPECT_EQ(PollTimeoutMs(now + absl::Microseconds(1), now), 1);
  EXPECT_EQ(PollTimeoutMs(now + absl::Microseconds(1500), now), 2);
  EXPECT_EQ(PollTimeoutMs(now + absl::Milliseconds(3), now), 3);
  EXPECT_EQ(PollTimeoutMs(now, now), 0);
}

TEST(PollTimeoutMs, FarDeadlinesSaturate) {
  EXPECT_EQ(PollTimeoutMs(absl::InfiniteFuture()), std::numeric_limits<int>::max());
  EXPECT_EQ(PollTimeoutMs(absl::Now() + absl::Hours(24 * 365)), std::numeric_limits<int>::max());
  const int ten_s = PollTimeoutMs(absl::Now() + absl::Seconds(10));
  EXPECT_GT(ten_s, 9000);
  EXPECT_LE(ten_s, 10000);
}

TEST(PollBackoff, YieldsFirstThenSleepsUpToOneMillisecond) {
  PollBackoff backoff;
  absl::Time start = absl::Now();
  for (int i = 0; i < 6; ++i) backoff.Pause();  // 1-32 us: yields only
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(50));
  start = absl::Now();
  for (int i = 0; i < 14; ++i) backoff.Pause();  // sleeps of 64-512 us, then 10 of 1 ms
  const absl::Duration slept = absl::Now() - start;
  EXPECT_GE(slept, absl::Microseconds(64 + 128 + 256 + 512) + absl::Milliseconds(10));
  EXPECT_LT(slept, absl::Seconds(1));  // capped at 1 ms each (generous for a loaded machine)
}

}  // namespace
}  // namespace shardkit
