#include "core/store/store_contract_test.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

using ::absl::StatusCode;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_P(StoreContractTest, SetThenGetAndOverwrite) {
  ASSERT_THAT(store_->Set("k", "v1"), IsOk());
  EXPECT_THAT(store_->Get("k", absl::Seconds(1)), IsOkAndHolds("v1"));
  ASSERT_THAT(store_->Set("k", "second value"), IsOk());
  EXPECT_THAT(store_->Get("k", absl::Seconds(1)), IsOkAndHolds("second value"));
}

TEST_P(StoreContractTest, ValuesAreArbitraryBytes) {
  std::string binary("a\0b\xff\n", 5);
  std::string large(1 << 20, 'x');
  large[12345] = '\0';
  ASSERT_THAT(store_->Set("binary", binary), IsOk());
  ASSERT_THAT(store_->Set("large", large), IsOk());
  ASSERT_THAT(store_->Set("empty", ""), IsOk());
  EXPECT_THAT(store_->Get("binary", absl::Seconds(1)), IsOkAndHolds(binary));
  EXPECT_THAT(store_->Get("large", absl::Seconds(1)), IsOkAndHolds(large));
  EXPECT_THAT(store_->Get("empty", absl::Seconds(1)), IsOkAndHolds(""));
}

TEST_P(StoreContractTest, KeysWithSlashesAndOddBytesAreDistinct) {
  const std::vector<std::string> keys = {"a/b", "a%2Fb", "a_2Fb", "a\xff", "a b", ".", "..", "a.b"};
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_THAT(store_->Set(keys[i], std::to_string(i)), IsOk()) << keys[i];
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_THAT(store_->Get(keys[i], absl::Seconds(1)), IsOkAndHolds(std::to_string(i)));
  }
}

TEST_P(StoreContractTest, GetTimesOutNamingKeyAndTime) {
  absl::Time start = absl::Now();
  EXPECT_THAT(store_->Get("never/set", absl::Milliseconds(50)),
              StatusIs(StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("Get timed out after"), HasSubstr("never/set\""))));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
}

TEST_P(StoreContractTest, WaitListsOnlyMissingKeys) {
  ASSERT_THAT(store_->Set("present", "1"), IsOk());
  EXPECT_THAT(store_->Wait({"present", "missing1", "missing2"}, absl::Milliseconds(30)),
              StatusIs(StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("keys still missing: \""), HasSubstr("missing1\", \""),
                             HasSubstr("missing2\""), Not(HasSubstr("present")))));
  EXPECT_THAT(store_->Wait({"present"}, absl::ZeroDuration()), IsOk());
  EXPECT_THAT(store_->Wait({}, absl::ZeroDuration()), IsOk());
}

TEST_P(StoreContractTest, WaitWakesWhenAnotherThreadSets) {
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_THAT(store_->Set("late", "x"), IsOk());
  });
  EXPECT_THAT(store_->Wait({"late"}, absl::Seconds(10)), IsOk());
  EXPECT_THAT(store_->Get("late", absl::Seconds(10)), IsOkAndHolds("x"));
  setter.join();
}

TEST_P(StoreContractTest, CheckDoesNotWait) {
  ASSERT_THAT(store_->Set("a", "1"), IsOk());
  EXPECT_THAT(store_->Check({"a"}), IsOkAndHolds(true));
  EXPECT_THAT(store_->Check({"a", "b"}), IsOkAndHolds(false));
  EXPECT_THAT(store_->Check({}), IsOkAndHolds(true));
}

TEST_P(StoreContractTest, AddCountsFromZero) {
  EXPECT_THAT(store_->Add("n", 5), IsOkAndHolds(5));
  EXPECT_THAT(store_->Add("n", -7), IsOkAndHolds(-2));
  EXPECT_THAT(store_->Add("n", 0), IsOkAndHolds(-2));
  EXPECT_THAT(store_->Get("n", absl::Seconds(1)), IsOkAndHolds("-2"));
  ASSERT_THAT(store_->Set("m", "40"), IsOk());
  EXPECT_THAT(store_->Add("m", 2), IsOkAndHolds(42));
}

TEST_P(StoreContractTest, AddRejectsNonIntegerAndOverflow) {
  ASSERT_THAT(store_->Set("text", "hello"), IsOk());
  EXPECT_THAT(store_->Add("text", 1),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not an integer")));
  ASSERT_THAT(store_->Set("big", "9223372036854775807"), IsOk());
  EXPECT_THAT(store_->Add("big", 1), StatusIs(StatusCode::kOutOfRange, HasSubstr("overflow")));
}

TEST_P(StoreContractTest, BadKeysAreInvalidArguments) {
  EXPECT_THAT(store_->Set("", "v"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty key")));
  EXPECT_THAT(store_->Get("", absl::Seconds(1)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty key")));
  EXPECT_THAT(store_->Add(std::string("a\0b", 3), 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NUL")));
  EXPECT_THAT(store_->Wait({"ok", ""}, absl::Seconds(1)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty key")));
  EXPECT_THAT(store_->Check({""}), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty key")));
}

TEST_P(StoreContractTest, ConcurrentAddsFromThreadsAreAtomic) {
  constexpr int kThreads = 6;
  constexpr int kAdds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) ASSERT_THAT(store_->Add("counter", 1), IsOk());
      ASSERT_THAT(store_->Set("done/" + std::to_string(t), "1"), IsOk());
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(store_->Add("counter", 0), IsOkAndHolds(kThreads * kAdds));
}

}  // namespace
}  // namespace shardkit::testing
