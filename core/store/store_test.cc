// Runs the Store contract on the in-process store, the file store and a prefix store, and
// checks what is specific to PrefixStore.
#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/store/file_store.h"
#include "core/store/memory_store.h"
#include "core/store/prefix_store.h"
#include "core/store/store_contract_test.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::testing {
namespace {

using ::absl::StatusCode;
using ::testing::HasSubstr;

std::shared_ptr<Store> MakeMemoryStore() { return std::make_shared<MemoryStore>(); }

std::shared_ptr<Store> MakeFileStore() {
  auto store = FileStore::Open(FreshTestDir("contract"));
  EXPECT_THAT(store, IsOk());
  return store.ok() ? std::shared_ptr<Store>(*std::move(store)) : nullptr;
}

std::shared_ptr<Store> MakePrefixStore() {
  return std::make_shared<PrefixStore>(MakeFileStore(), "run-1");
}

INSTANTIATE_TEST_SUITE_P(All, StoreContractTest,
                         ::testing::Values(StoreFactory{"memory", &MakeMemoryStore},
                                           StoreFactory{"file", &MakeFileStore},
                                           StoreFactory{"prefix_over_file", &MakePrefixStore}),
                         StoreFactoryName);

TEST(PrefixStoreTest, NamespacesAreIsolated) {
  auto base = std::make_shared<MemoryStore>();
  PrefixStore run1(base, "run1");
  PrefixStore run2(base, "run2");
  ASSERT_THAT(run1.Set("addr", "one"), IsOk());
  ASSERT_THAT(run2.Set("addr", "two"), IsOk());
  EXPECT_THAT(run1.Get("addr", absl::Seconds(1)), IsOkAndHolds("one"));
  EXPECT_THAT(base->Get("run2/addr", absl::Seconds(1)), IsOkAndHolds("two"));
  EXPECT_THAT(run1.Add("n", 3), IsOkAndHolds(3));
  EXPECT_THAT(run2.Check({"n"}), IsOkAndHolds(false));
}

TEST(PrefixStoreTest, NestedPrefixesAndErrorsNameFullKeys) {
  auto base = std::make_shared<MemoryStore>();
  auto run = std::make_shared<PrefixStore>(base, "run");
  PrefixStore group(run, "group1");
  ASSERT_THAT(group.Set("k", "v"), IsOk());
  EXPECT_THAT(base->Get("run/group1/k", absl::Seconds(1)), IsOkAndHolds("v"));
  EXPECT_THAT(group.Wait({"k", "x"}, absl::Milliseconds(10)),
              StatusIs(StatusCode::kDeadlineExceeded, HasSubstr("\"run/group1/x\"")));
  EXPECT_THAT(group.Set("", "v"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty key")));
}

}  // namespace
}  // namespace shardkit::testing
