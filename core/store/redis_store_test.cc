// RedisStore against a real redis-server started on a free loopback port: the Store contract
// (through redis:// URLs with a fresh prefix per test), connection errors and reconnection.
#include "core/store/redis_store.h"

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/store/store_contract_test.h"
#include "core/store/store_url.h"
#include "gmock/gmock.h"
#include "testing/redis_server.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

using ::absl::StatusCode;
using ::testing::AllOf;
using ::testing::HasSubstr;

RedisServer* server = nullptr;  // owned by RedisEnvironment
absl::Status server_status;

class RedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto started = RedisServer::Start(std::getenv("TEST_TMPDIR"));
    server_status = started.status();
    if (started.ok()) owned_ = *std::move(started);
    server = owned_.get();
  }
  void TearDown() override { owned_.reset(); }

 private:
  std::unique_ptr<RedisServer> owned_;
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new RedisEnvironment);

// GTEST_SKIP and ASSERT return from this function only: each caller returns after it when it
// skipped or failed, so that no test goes on without a server.
void RequireServer() {
  if (absl::IsNotFound(server_status)) GTEST_SKIP() << server_status;
  ASSERT_NE(server, nullptr) << server_status;
}

// A fresh namespace per test on the shared server, through the URL path ranks use.
std::shared_ptr<Store> MakeRedisStore() {
  if (server == nullptr) return nullptr;
  static int counter = 0;
  auto store = OpenStore(absl::StrCat(server->url(), "/contract/", ++counter));
  EXPECT_THAT(store, IsOk());
  return store.ok() ? std::shared_ptr<Store>(*std::move(store)) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreContractTest,
                         ::testing::Values(StoreFactory{"redis", &MakeRedisStore}),
                         StoreFactoryName);

TEST(RedisStoreTest, ServerIsRunning) {
  if (absl::IsNotFound(server_status)) GTEST_SKIP() << server_status;
  EXPECT_THAT(server_status, IsOk());
}

TEST(RedisStoreTest, PrefixesFromUrlsAreIsolated) {
  RequireServer();
  if (IsSkipped() || HasFatalFailure()) return;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, OpenStore(server->url() + "/jobs/a"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, OpenStore(server->url() + "/jobs/b"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> root, OpenStore(server->url()));
  ASSERT_THAT(a->Set("k", "from a"), IsOk());
  EXPECT_THAT(b->Check({"k"}), IsOkAndHolds(false));
  EXPECT_THAT(root->Get("jobs/a/k", absl::Seconds(1)), IsOkAndHolds("from a"));
}

TEST(RedisStoreTest, NothingListeningIsUnavailable) {
  RequireServer();
  if (IsSkipped() || HasFatalFailure()) return;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto other, RedisServer::Start(std::getenv("TEST_TMPDIR")));
  const int port = other->port();
  other.reset();  // the port is now closed
  EXPECT_THAT(RedisStore::Connect("127.0.0.1", port, absl::Seconds(2)),
              StatusIs(StatusCode::kUnavailable, AllOf(HasSubstr(absl::StrCat("127.0.0.1:", port)),
                                                       HasSubstr("cannot connect"))));
}

TEST(RedisStoreTest, ReconnectsAfterServerRestart) {
  RequireServer();
  if (IsSkipped() || HasFatalFailure()) return;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto own, RedisServer::Start(std::getenv("TEST_TMPDIR")));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisStore> store,
                                RedisStore::Connect("127.0.0.1", own->port(), absl::Seconds(2)));
  ASSERT_THAT(store->Set("k", "1"), IsOk());
  own->Stop();
  EXPECT_THAT(store->Set("k", "2"),
              StatusIs(StatusCode::kUnavailable, HasSubstr(absl::StrCat(":", own->port()))));
  EXPECT_THAT(store->Add("n", 1), StatusIs(StatusCode::kUnavailable, HasSubstr("cannot connect")));
  ASSERT_THAT(own->Restart(), IsOk());
  EXPECT_THAT(store->Set("k", "3"), IsOk());  // a fresh connection to the new server
  EXPECT_THAT(store->Get("k", absl::Seconds(1)), IsOkAndHolds("3"));
  EXPECT_THAT(store->Add("n", 1), IsOkAndHolds(1));
}

}  // namespace
}  // namespace shardkit::testing
