// The fixtures themselves: failures come back with their rank, hanging ranks are killed and named,
// and no child is left behind.
#include "testing/multiprocess.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

void ExpectNoChildren() {
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(ForkRanks, ReportsFailuresWithTheirRank) {
  absl::Status status = ForkRanks(
      3, [](int rank, const std::string&) { EXPECT_NE(rank, 1) << "rank one is unhappy"; });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal,
                               AllOf(HasSubstr("rank 1 failed"), HasSubstr("rank one is unhappy"),
                                     Not(HasSubstr("rank 0")), Not(HasSubstr("rank 2")))));
  ExpectNoChildren();
}

TEST(ForkRanks, KillsAndNamesALateRank) {
  RankOptions options;
  options.deadline = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  absl::Status status = ForkRanks(
      3,
      [](int rank, const std::string&) {
        if (rank == 2) sleep(30);
      },
      options);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("rank 2 did not finish within 0.5 s")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ExpectNoChildren();
}

TEST(ForkRanks, ReportsCrashes) {
  EXPECT_THAT(ForkRanks(2,
                        [](int rank, const std::string&) {
                          if (rank == 0) abort();
                        }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("rank 0 was killed by signal 6")));
  ExpectNoChildren();
}

TEST(RunRanksInThreads, ConnectsEveryRank) {
  SHARDKIT_EXPECT_OK(RunRanksInThreads(4, "gloo", [](int rank, Communicator& comm) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.world_size(), 4);
    SHARDKIT_EXPECT_OK(comm.Barrier());
  }));
}

void FailOnRankTwo(int rank, Communicator& comm, std::string_view arg) {
  EXPECT_NE(rank, 2) << arg;
}
void Succeed(int, Communicator& comm, std::string_view) { SHARDKIT_EXPECT_OK(comm.Barrier()); }

TEST(RankGroup, RunsCasesAndRestartsAfterAFailure) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(3, "gloo"));
  SHARDKIT_EXPECT_OK(group->Run(&Succeed));
  SHARDKIT_EXPECT_OK(group->Run(&Succeed));
  EXPECT_THAT(group->Run(&FailOnRankTwo, "case argument"),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("rank 2 failed"), HasSubstr("case argument"))));
  EXPECT_FALSE(group->healthy());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * fresh, RankGroup::Shared(3, "gloo"));
  SHARDKIT_EXPECT_OK(fresh->Run(&Succeed));
}

}  // namespace
}  // namespace shardkit::testing
