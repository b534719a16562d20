#include "core/base/check.h"
#include "core/base/status_macros.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

absl::Status FailIf(bool fail) {
  if (fail) return absl::DataLossError("lost");
  return absl::OkStatus();
}

absl::StatusOr<int> Value(bool fail) {
  if (fail) return absl::UnavailableError("gone");
  return 7;
}

absl::StatusOr<int> Chain(bool fail_first, bool fail_second) {
  SHARDKIT_RETURN_IF_ERROR(FailIf(fail_first));
  SHARDKIT_ASSIGN_OR_RETURN(int v, Value(fail_second));
  return v * 2;
}

TEST(StatusMacrosTest, PropagatesFirstError) {
  EXPECT_THAT(Chain(false, false), IsOkAndHolds(14));
  EXPECT_THAT(Chain(true, false), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("lost")));
  EXPECT_THAT(Chain(false, true), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("gone")));
}

TEST(StatusMacrosTest, AnnotateKeepsCode) {
  EXPECT_THAT(Annotate(absl::NotFoundError("x"), "ctx"),
              StatusIs(absl::StatusCode::kNotFound, ::testing::Eq("ctx: x")));
  EXPECT_TRUE(Annotate(absl::OkStatus(), "ctx").ok());
}

TEST(CheckDeathTest, FailedCheckAbortsWithMessage) {
  int offset = 5;
  EXPECT_DEATH(SHARDKIT_CHECK(offset < 3) << "offset " << offset,
               "Check failed: offset < 3 offset 5");
  SHARDKIT_CHECK(offset == 5) << "never printed";
}

TEST(CheckDeathTest, LogWritesSeverityAndLocation) {
  ::testing::internal::CaptureStderr();
  SHARDKIT_LOG(WARNING) << "plan rule " << 2;
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("[shardkit W status_test.cc:"));
  EXPECT_THAT(err, HasSubstr("plan rule 2\n"));
}

}  // namespace
}  // namespace shardkit
