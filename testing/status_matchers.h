// GoogleTest matchers for absl::Status / absl::StatusOr (Debian's Abseil lacks them).
//
//   EXPECT_THAT(ParseDType("f33"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f33")));
//   EXPECT_THAT(DoThing(), IsOk());
//   EXPECT_THAT(Compute(), IsOkAndHolds(42));
//   SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Empty({2}, DType::kInt8));
#ifndef SHARDKIT_TESTING_STATUS_MATCHERS_H_
#define SHARDKIT_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit::testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace internal

MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  const absl::Status& status = internal::GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status.ToString();
  return status.ok();
}

// Matches a Status or StatusOr whose code is `code` and whose message matches `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has code ") + absl::StatusCodeToString(code)) {
  const absl::Status& status = internal::GetStatus(arg);
  *result_listener << "status is " << status.ToString();
  if (status.code() != code) return false;
  return ::testing::ExplainMatchResult(message_matcher, std::string(status.message()),
                                       result_listener);
}

MATCHER_P(IsOkAndHolds, value_matcher, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status().ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

}  // namespace shardkit::testing

#define SHARDKIT_TESTING_CONCAT_INNER_(a, b) a##b
#define SHARDKIT_TESTING_CONCAT_(a, b) SHARDKIT_TESTING_CONCAT_INNER_(a, b)

// Asserts that `rexpr` (a StatusOr) is OK and moves its value into `lhs`.
#define SHARDKIT_ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  SHARDKIT_ASSERT_OK_AND_ASSIGN_IMPL_(SHARDKIT_TESTING_CONCAT_(shardkit_sor_, __LINE__), lhs, rexpr)

#define SHARDKIT_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                        \
  ASSERT_TRUE(statusor.ok()) << statusor.status().ToString();     \
  lhs = std::move(statusor).value()

#define SHARDKIT_ASSERT_OK(expr) ASSERT_THAT((expr), ::shardkit::testing::IsOk())
#define SHARDKIT_EXPECT_OK(expr) EXPECT_THAT((expr), ::shardkit::testing::IsOk())

#endif  // SHARDKIT_TESTING_STATUS_MATCHERS_H_
