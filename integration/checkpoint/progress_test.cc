#include "integration/checkpoint/progress.h"

#include <sstream>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit::checkpoint {
namespace {

using ::testing::HasSubstr;

TEST(ProgressTest, FormatsBytesAndRates) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(FormatRate(2 << 20, 2.0), "1.0 MiB/s");
  EXPECT_EQ(FormatRate(5, 0), "-");
  EXPECT_EQ(FormatEta(0, 100, 1.0), "ETA -");
  EXPECT_EQ(FormatEta(25, 100, 2.0), "ETA 6 s");
}

TEST(ProgressTest, PrintsAtMostOncePerSecondAndOnlyWhenEnabled) {
  std::ostringstream quiet, loud;
  Progress off(quiet, false, "reading", 4, 4096);
  Progress on(loud, true, "reading", 4, 4096);
  on.Step(1, 1024);  // within the first second: silent
  EXPECT_EQ(loud.str(), "");
  absl::SleepFor(absl::Milliseconds(1050));
  off.Step(2, 2048);
  on.Step(2, 2048);
  on.Step(3, 3072);  // throttled
  EXPECT_EQ(quiet.str(), "");
  EXPECT_THAT(loud.str(), HasSubstr("reading 2/4 parameters, 2.0 KiB/4.0 KiB, "));
  EXPECT_THAT(loud.str(), HasSubstr("/s, ETA "));
  EXPECT_EQ(loud.str().find("3/4"), std::string::npos);
}

}  // namespace
}  // namespace shardkit::checkpoint
