#include "core/comm/culprit.h"

#include "core/base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit {
namespace {

TEST(Culprit, TravelsThroughAnnotateAndLeadsTheMessage) {
  absl::Status status = absl::DeadlineExceededError("peer 1: timed out");
  SetCulprit(status, {1, Culprit::How::kStalled});
  status = Annotate(Annotate(status, "AllToAll (rank=2/4)"), "Sync round 3 of 9");
  ASSERT_EQ(GetCulprit(status), (Culprit{1, Culprit::How::kStalled}));
  const absl::Status led = LeadWithCulprit(status, "Sync");
  EXPECT_EQ(led.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(led.message(),
            "Sync failed: rank 1 stopped making progress (stalled? the ranks waiting on it reached "
            "their deadline)\nSync round 3 of 9: AllToAll (rank=2/4): peer 1: timed out");
  EXPECT_EQ(GetCulprit(led), GetCulprit(status));
}

TEST(Culprit, NoneAttachedLeavesTheStatusAlone) {
  const absl::Status status = absl::UnavailableError("peer 2: reset");
  EXPECT_EQ(GetCulprit(status), std::nullopt);
  EXPECT_EQ(LeadWithCulprit(status, "Sync"), status);
  absl::Status ok;
  SetCulprit(ok, {1, Culprit::How::kVanished});  // OK stays OK, without a payload
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(GetCulprit(ok), std::nullopt);
}

TEST(Culprit, EachHowInWords) {
  EXPECT_EQ(DescribeCulprit({3, Culprit::How::kVanished}),
            "rank 3 went away without closing its communicator (killed or crashed?)");
  EXPECT_EQ(DescribeCulprit({3, Culprit::How::kLeft}), "rank 3 went away or gave up");
}

}  // namespace
}  // namespace shardkit
