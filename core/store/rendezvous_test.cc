// JoinFreshGeneration on real stores (a FileStore directory, a real redis-server, the in-process
// store), one thread per process of a job: jobs that reuse a prefix, two processes claiming one
// rank, a slow sibling of a failed launch, ranks that never join, claims a killed job left.
#include "core/store/rendezvous.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/store/file_store.h"
#include "core/store/memory_store.h"
#include "core/store/store_url.h"
#include "gmock/gmock.h"
#include "testing/redis_server.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::testing {
namespace {

using ::absl::StatusCode;
using ::testing::_;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Each;
using ::testing::HasSubstr;

RedisServer* redis = nullptr;  // owned by RedisEnvironment; null without redis-server

class RedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto started = RedisServer::Start(std::getenv("TEST_TMPDIR"));
    // Not installed: the Redis cases skip. Installed but not starting: they fail.
    if (!absl::IsNotFound(started.status())) {
      ASSERT_THAT(started, IsOk());
    }
    if (started.ok()) owned_ = *std::move(started);
    redis = owned_.get();
  }
  void TearDown() override { owned_.reset(); }

 private:
  std::unique_ptr<RedisServer> owned_;
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new RedisEnvironment);

std::shared_ptr<Store> MakeMemoryStore() { return std::make_shared<MemoryStore>(); }

std::shared_ptr<Store> MakeFileStore() {
  auto store = FileStore::Open(FreshTestDir("rendezvous"));
  EXPECT_THAT(store, IsOk());
  return store.ok() ? std::shared_ptr<Store>(*std::move(store)) : nullptr;
}

std::shared_ptr<Store> MakeRedisStore() {
  if (redis == nullptr) return nullptr;
  static int counter = 0;
  auto store = OpenStore(absl::StrCat(redis->url(), "/rendezvous/", ++counter));
  EXPECT_THAT(store, IsOk());
  return store.ok() ? std::shared_ptr<Store>(*std::move(store)) : nullptr;
}

struct StoreFactory {
  std::string name;
  std::shared_ptr<Store> (*make)();
};

std::string StoreName(const ::testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

// One process of a job: the rank it claims and its launcher's id.
struct Process {
  int rank;
  std::string launch;
};

// Results of JoinFreshGeneration for each process, all started at once (a thread each) under
// prefix "/p" with a world of `size`.
std::vector<absl::StatusOr<std::string>> JoinAll(Store& store, int size,
                                                 const std::vector<Process>& processes,
                                                 absl::Duration timeout = absl::Seconds(30)) {
  std::vector<absl::StatusOr<std::string>> results(processes.size(), absl::UnknownError(""));
  std::vector<std::thread> threads;
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t i = 0; i < processes.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] =
          JoinFreshGeneration(store, "/p", processes[i].rank, size, processes[i].launch, deadline);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Ranks 0..size-1 of a job of two launches, named `launch`-1 (the first half) and `launch`-2.
std::vector<Process> WholeJob(int size, const std::string& launch) {
  std::vector<Process> job;
  for (int r = 0; r < size; ++r) job.push_back({r, absl::StrCat(launch, r < size / 2 ? 1 : 2)});
  return job;
}

// The single message every result fails with (and that they all fail with `code`).
std::string SharedFailure(const std::vector<absl::StatusOr<std::string>>& results,
                          StatusCode code) {
  EXPECT_THAT(results, Each(StatusIs(code, _)));
  const std::string first(results.front().status().message());
  for (const auto& result : results) EXPECT_EQ(result.status().message(), first);
  return first;
}

class RendezvousTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
    if (store_ == nullptr) GTEST_SKIP() << "store " << GetParam().name << " is not available";
  }
  std::shared_ptr<Store> store_;
};

// What failed before generations: the second job read the first one's keys. Each job now meets
// under a prefix of its own, whatever its world size.
TEST_P(RendezvousTest, JobsReusingAPrefixGetGenerationsOfTheirOwn) {
  for (int size : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE(absl::StrCat("world of ", size));
    std::shared_ptr<Store> store = GetParam().make();
    for (int job = 0; job < 3; ++job) {
      EXPECT_THAT(JoinAll(*store, size, WholeJob(size, absl::StrCat("job", job))),
                  Each(IsOkAndHolds(absl::StrCat("/p/gen", job))));
    }
  }
}

// Two launches of ranks 0 and 1 in a world of 4: every process fails at once with the same
// message instead of waiting for ranks 2 and 3; a job started right after meets as usual.
TEST_P(RendezvousTest, TwoProcessesClaimingOneRankFailEveryProcessAtOnce) {
  const absl::Time start = absl::Now();
  const std::string message = SharedFailure(
      JoinAll(*store_, 4, {{0, "a"}, {1, "a"}, {0, "b"}, {1, "b"}}), StatusCode::kInvalidArgument);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the timeout is 30 s";
  EXPECT_THAT(message, AllOf(HasSubstr("was claimed by two processes at the rendezvous of 4"),
                             HasSubstr("--rank-offset ranges of two launches overlap"),
                             HasSubstr("Each of ranks 0..3 must be started once")));
  EXPECT_THAT(message, AnyOf(HasSubstr("rank 0 was"), HasSubstr("rank 1 was")));
  EXPECT_THAT(JoinAll(*store_, 4, WholeJob(4, "next")), Each(IsOkAndHolds("/p/gen1")));
}

// A process of launch "b" that arrives after its generation failed fails with it; one of another
// launch (or of none) is a later job's.
TEST_P(RendezvousTest, ASlowSiblingFailsWithItsLaunch) {
  const std::string message = SharedFailure(JoinAll(*store_, 3, {{0, "a"}, {1, "a"}, {1, "b"}}),
                                            StatusCode::kInvalidArgument);
  EXPECT_THAT(JoinAll(*store_, 3, {{2, "b"}}),
              Each(StatusIs(StatusCode::kInvalidArgument, message)));
  EXPECT_THAT(JoinAll(*store_, 3, {{0, "c"}, {1, ""}, {2, "d"}}), Each(IsOkAndHolds("/p/gen1")));
}

// Launches "a" (ranks 0-2) and "b" (ranks 2-3) of a world of 4 overlap on rank 2 and together start
// every rank: when "b"'s rank 2 comes after the others joined, it fails at once naming its rank
// (its launch's rank 3 is a member), where it used to wait alone in the next generation.
TEST_P(RendezvousTest, ALateDuplicateOfALaunchInTheJobFailsAtOnce) {
  EXPECT_THAT(JoinAll(*store_, 4, {{0, "a"}, {1, "a"}, {2, "a"}, {3, "b"}}),
              Each(IsOkAndHolds("/p/gen0")));
  const absl::Time start = absl::Now();
  EXPECT_THAT(JoinAll(*store_, 4, {{2, "b"}}),
              Each(StatusIs(StatusCode::kInvalidArgument,
                            AllOf(HasSubstr("rank 2 was claimed by two processes"),
                                  HasSubstr("--rank-offset ranges of two launches overlap")))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the timeout is 30 s";
  // A later job of other launches meets as usual.
  EXPECT_THAT(JoinAll(*store_, 4, WholeJob(4, "next")), Each(IsOkAndHolds("/p/gen1")));
}

// One launch running two jobs in a row (`sh -c 'shardkit …; shardkit …'` in every rank): the second
// job's processes find their own launch's ranks in the first generation and meet in the next.
TEST_P(RendezvousTest, ALaunchRunningTwoJobsInARowMeetsTwice) {
  const std::vector<Process> launch = {{0, "l"}, {1, "l"}, {2, "l"}};
  EXPECT_THAT(JoinAll(*store_, 3, launch), Each(IsOkAndHolds("/p/gen0")));
  EXPECT_THAT(JoinAll(*store_, 3, launch), Each(IsOkAndHolds("/p/gen1")));
}

// Every waiting rank gets the first deadline's message, naming the absent rank; the generation
// is then over, so the next job does not meet the claims of this one. A timed-out generation
// does not hold a late process of its launches back: it joins the next job.
TEST_P(RendezvousTest, RanksThatNeverJoinAreNamedAndTheirGenerationIsSetAside) {
  const std::string message =
      SharedFailure(JoinAll(*store_, 4, {{0, "a"}, {1, "a"}, {2, "b"}}, absl::Milliseconds(300)),
                    StatusCode::kDeadlineExceeded);
  EXPECT_THAT(message, HasSubstr("rendezvous of 4 ranks timed out: rank 3 never joined (store "
                                 "keys under \"/p/gen0\")"));
  EXPECT_THAT(JoinAll(*store_, 4, {{0, "c"}, {1, "c"}, {2, "d"}, {3, "b"}}),
              Each(IsOkAndHolds("/p/gen1")));
}

// Claims of a job killed while joining look alive: a rank claimed again fails at once, with the
// way out in its message.
TEST_P(RendezvousTest, ClaimsOfAKilledJobFailTheNextJobAtOnce) {
  ASSERT_THAT(store_->Add("/p/gen0/claim/0", 1), IsOk());
  ASSERT_THAT(store_->Add("/p/gen0/claimed", 1), IsOk());
  EXPECT_THAT(JoinAll(*store_, 2, {{0, "a"}}),
              Each(StatusIs(StatusCode::kInvalidArgument,
                            AllOf(HasSubstr("rank 0 was claimed by two processes"),
                                  HasSubstr("pass a fresh --run-id")))));
}

INSTANTIATE_TEST_SUITE_P(Stores, RendezvousTest,
                         ::testing::Values(StoreFactory{"file", &MakeFileStore},
                                           StoreFactory{"redis", &MakeRedisStore},
                                           StoreFactory{"memory", &MakeMemoryStore}),
                         StoreName);

}  // namespace
}  // namespace shardkit::testing
