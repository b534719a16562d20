#include "testing/status_matchers.h"

#include "gtest/gtest-spi.h"

namespace shardkit::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<int> Fortytwo() { return 42; }
absl::StatusOr<int> Fails() { return absl::NotFoundError("no such thing"); }

TEST(StatusMatchersTest, IsOkMatchesOnlyOk) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(Fortytwo(), IsOk());
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
  EXPECT_THAT(Fails(), Not(IsOk()));
}

TEST(StatusMatchersTest, StatusIsChecksCodeAndMessage) {
  EXPECT_THAT(Fails(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("such")));
  EXPECT_THAT(Fails(), Not(StatusIs(absl::StatusCode::kInternal, HasSubstr("such"))));
  EXPECT_THAT(Fails(), Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("other"))));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk, ::testing::IsEmpty()));
}

TEST(StatusMatchersTest, IsOkAndHoldsChecksValue) {
  EXPECT_THAT(Fortytwo(), IsOkAndHolds(42));
  EXPECT_THAT(Fortytwo(), Not(IsOkAndHolds(41)));
  EXPECT_THAT(Fails(), Not(IsOkAndHolds(42)));
}

TEST(StatusMatchersTest, AssertOkAndAssignFailsOnError) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(int v, Fortytwo());
  EXPECT_EQ(v, 42);
  EXPECT_FATAL_FAILURE(
      {
        SHARDKIT_ASSERT_OK_AND_ASSIGN(int w, Fails());
        (void)w;
      },
      "no such thing");
}

}  // namespace
}  // namespace shardkit::testing
