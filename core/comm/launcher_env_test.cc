#include "core/comm/launcher_env.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit {
namespace {

using ::absl::StatusCode;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Vars = std::map<std::string, std::string>;

absl::StatusOr<LauncherEnv> Detect(const Vars& vars) {
  return DetectLauncher([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// What torchrun, mpirun and srun set for the same rank 1 of 4 (local rank 1).
const Vars kTorchrun = {{"TORCHELASTIC_RUN_ID", "job7"},
                        {"RANK", "1"},
                        {"WORLD_SIZE", "4"},
                        {"LOCAL_RANK", "1"},
                        {"MASTER_PORT", "29500"}};
const Vars kOpenMpi = {{"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
const Vars kSlurmStep = {{"SLURM_JOB_ID", "812"},
                         {"SLURM_STEP_ID", "3"},
                         {"SLURM_PROCID", "1"},
                         {"SLURM_NTASKS", "4"},
                         {"SLURM_LOCALID", "1"}};

Vars Merge(Vars a, const Vars& b) {
  a.insert(b.begin(), b.end());
  return a;
}

void ExpectRank(const absl::StatusOr<LauncherEnv>& got, Launcher launcher, int rank, int world,
                int local_rank) {
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->launcher, launcher);
  EXPECT_EQ(got->rank, rank);
  EXPECT_EQ(got->world_size, world);
  EXPECT_EQ(got->local_rank, local_rank);
}

TEST(DetectLauncherTest, NothingSetIsAWorldOfOne) {
  ExpectRank(Detect({}), Launcher::kNone, 0, 1, 0);
  // RANK/WORLD_SIZE without TORCHELASTIC_RUN_ID are some other program's, not torchrun's.
  ExpectRank(Detect({{"RANK", "1"}, {"WORLD_SIZE", "4"}}), Launcher::kNone, 0, 1, 0);
}

TEST(DetectLauncherTest, EachLauncher) {
  ExpectRank(Detect(kTorchrun), Launcher::kTorchrun, 1, 4, 1);
  ExpectRank(Detect(kOpenMpi), Launcher::kOpenMpi, 1, 4, 1);
  ExpectRank(Detect(kSlurmStep), Launcher::kSlurm, 1, 4, 1);
  ExpectRank(Detect({{"SHARDKIT_RANK", "2"}, {"SHARDKIT_WORLD_SIZE", "3"}}), Launcher::kShardkit, 2,
             3, 2);
  EXPECT_EQ(Detect(kTorchrun)->description, "torchrun (RANK=1, WORLD_SIZE=4)");
  EXPECT_EQ(Detect(kOpenMpi)->description,
            "Open MPI (OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4)");
  EXPECT_EQ(Detect(kSlurmStep)->description, "Slurm srun (SLURM_PROCID=1, SLURM_NTASKS=4)");
}

TEST(DetectLauncherTest, LocalRankDefaultsToTheRank) {
  ExpectRank(Detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
             Launcher::kOpenMpi, 3, 4, 3);
}

TEST(DetectLauncherTest, RunIds) {
  EXPECT_EQ(Detect(kTorchrun)->run_id, "job7");
  EXPECT_EQ(Detect(Merge({{"TORCHELASTIC_RESTART_COUNT", "2"}}, kTorchrun))->run_id,
            "job7.restart2");
  EXPECT_EQ(Detect(Merge({{"TORCHELASTIC_RESTART_COUNT", "0"}}, kTorchrun))->run_id, "job7");
  // torchrun's default --rdzv-id is the same for every run: agree through the store instead.
  EXPECT_EQ(Detect(Merge({{"TORCHELASTIC_RUN_ID", "none"}}, kTorchrun))->run_id, "");
  EXPECT_EQ(Detect(kSlurmStep)->run_id, "812.3");
  EXPECT_EQ(Detect(kOpenMpi)->run_id, "");
  // The user's choice beats the launcher's.
  EXPECT_EQ(Detect(Merge({{"SHARDKIT_RUN_ID", "mine"}}, kOpenMpi))->run_id, "mine");
  EXPECT_EQ(Detect(Merge({{"SHARDKIT_RUN_ID", "mine"}}, kSlurmStep))->run_id, "mine");
  EXPECT_THAT(Detect(Merge({{"TORCHELASTIC_RUN_ID", "a/b"}}, kTorchrun)),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"a/b\""), HasSubstr("TORCHELASTIC_RUN_ID"))));
}

// The innermost wins: shardkit launch, torchrun, Open MPI, Slurm; outer ones that agree are quiet.
TEST(DetectLauncherTest, InnermostLauncherWins) {
  const Vars all = Merge(Merge(kTorchrun, kOpenMpi), kSlurmStep);
  ExpectRank(Detect(all), Launcher::kTorchrun, 1, 4, 1);
  EXPECT_THAT(Detect(all)->warnings, IsEmpty());
  ExpectRank(Detect(Merge(kOpenMpi, kSlurmStep)), Launcher::kOpenMpi, 1, 4, 1);
  ExpectRank(Detect(Merge({{"SHARDKIT_RANK", "0"}, {"SHARDKIT_WORLD_SIZE", "2"}}, all)),
             Launcher::kShardkit, 0, 2, 0);
  // Empty counts as unset.
  ExpectRank(Detect(Merge({{"SHARDKIT_RANK", ""}, {"SHARDKIT_WORLD_SIZE", ""}}, all)),
             Launcher::kTorchrun, 1, 4, 1);
}

TEST(DetectLauncherTest, OuterLauncherThatDisagreesIsNamedInAWarning) {
  // torchrun with 4 ranks per node, started by `srun -N2 -n2`: rank 5 of 8 in Slurm's task 1 of 2.
  Vars vars = Merge({{"RANK", "5"}, {"WORLD_SIZE", "8"}}, kTorchrun);
  vars = Merge(vars, {{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  absl::StatusOr<LauncherEnv> got = Detect(vars);
  ExpectRank(got, Launcher::kTorchrun, 5, 8, 1);
  EXPECT_THAT(got->warnings,
              ElementsAre(AllOf(HasSubstr("torchrun (RANK=5, WORLD_SIZE=8)"),
                                HasSubstr("Slurm srun (SLURM_PROCID=1, SLURM_NTASKS=2)"))));
  // An outer launcher whose variables cannot be read is named too, and does not stop the inner.
  got = Detect(
      Merge(kOpenMpi, {{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "4"}}));
  ExpectRank(got, Launcher::kOpenMpi, 1, 4, 1);
  EXPECT_THAT(got->warnings, ElementsAre(AllOf(HasSubstr("ignoring the outer launcher Slurm"),
                                               HasSubstr("SLURM_PROCID=\"x\""))));
}

// `srun --pty bash` (a step of one task), then `shard --nproc 3`: no launcher, no warning.
TEST(DetectLauncherTest, WorldOfOneIsNoLauncher) {
  absl::StatusOr<LauncherEnv> got =
      Detect({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  ExpectRank(got, Launcher::kNone, 0, 1, 0);
  EXPECT_THAT(got->warnings, IsEmpty());
  // A world-of-one torchrun in each of 4 srun tasks: still no launcher, but the mismatch is named.
  got = Detect(Merge({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}},
                     Merge(kTorchrun, kSlurmStep)));
  ExpectRank(got, Launcher::kNone, 0, 1, 0);
  EXPECT_THAT(got->warnings, ElementsAre(HasSubstr("SLURM_NTASKS=4")));
  // `shardkit launch --nproc 1` is still a launcher: `--nproc` under it is an error.
  ExpectRank(Detect({{"SHARDKIT_RANK", "0"}}), Launcher::kShardkit, 0, 1, 0);
}

// A batch script's own environment: SLURM_NTASKS of the allocation, no step.
TEST(DetectLauncherTest, SlurmBatchScriptIsNoLauncher) {
  absl::StatusOr<LauncherEnv> got = Detect({{"SLURM_JOB_ID", "812"},
                                            {"SLURM_NTASKS", "4"},
                                            {"SLURM_PROCID", "0"},
                                            {"SLURM_LOCALID", "0"}});
  ExpectRank(got, Launcher::kNone, 0, 1, 0);
  EXPECT_THAT(got->warnings, IsEmpty());
  // mpirun inside that batch script: Open MPI's ranks, and the batch variables are not compared.
  got = Detect(Merge(kOpenMpi, {{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "0"}}));
  ExpectRank(got, Launcher::kOpenMpi, 1, 4, 1);
  EXPECT_THAT(got->warnings, IsEmpty());
}

TEST(DetectLauncherTest, MalformedValuesNameTheVariable) {
  const auto invalid = [](const std::string& text) {
    return StatusIs(StatusCode::kInvalidArgument, HasSubstr(text));
  };
  EXPECT_THAT(Detect(Merge({{"RANK", "one"}}, kTorchrun)),
              invalid("RANK=\"one\" is not an integer"));
  EXPECT_THAT(Detect(Merge({{"RANK", "4"}}, kTorchrun)), invalid("RANK=4 is outside 0..3"));
  EXPECT_THAT(Detect(Merge({{"OMPI_COMM_WORLD_SIZE", "0"}}, kOpenMpi)),
              invalid("OMPI_COMM_WORLD_SIZE=0 is not a world size"));
  EXPECT_THAT(Detect(Merge({{"SLURM_LOCALID", "-1"}}, kSlurmStep)),
              invalid("SLURM_LOCALID=-1 is outside 0..3"));
  EXPECT_THAT(Detect({{"TORCHELASTIC_RUN_ID", "j"}, {"RANK", "0"}}),
              invalid("WORLD_SIZE is unset, but other variables of torchrun are set"));
  EXPECT_THAT(Detect({{"SHARDKIT_RANK", "3"}}),
              invalid("SHARDKIT_RANK=3 is outside 0..0, the ranks of SHARDKIT_WORLD_SIZE unset"));
  EXPECT_THAT(Detect({{"SHARDKIT_WORLD_SIZE", "two"}}), invalid("SHARDKIT_WORLD_SIZE=\"two\""));
}

TEST(BackendNeedsStoreTest, AllButMpi) {
  EXPECT_TRUE(BackendNeedsStore("gloo"));
  EXPECT_TRUE(BackendNeedsStore("nccl"));
  EXPECT_FALSE(BackendNeedsStore("mpi"));
}

class CompleteForLauncherTest : public ::testing::Test {
 protected:
  // A fresh store directory for each test.
  std::string StoreUrl() {
    return "file://" +
           testing::TestPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
};

TEST_F(CompleteForLauncherTest, MissingStoreIsLeftToConnect) {
  ConnectOptions options;
  EXPECT_THAT(CompleteForLauncher(*Detect(kTorchrun), &options), IsOk());
  EXPECT_EQ(options.store_url, "");
}

TEST(MissingStoreErrorTest, SaysWhichVariableToSetAndWhatStartedTheRank) {
  ConnectOptions options;
  options.world_size = 4;
  EXPECT_THAT(MissingStoreError(*Detect(kTorchrun), options),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("torchrun (RANK=1, WORLD_SIZE=4) started this rank"),
                             HasSubstr("backend gloo"), HasSubstr("set SHARDKIT_STORE"),
                             HasSubstr("MASTER_PORT"))));
  EXPECT_THAT(MissingStoreError(*Detect(kSlurmStep), options),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("Slurm srun"), HasSubstr("set SHARDKIT_STORE"))));
  EXPECT_THAT(MissingStoreError(LauncherEnv(), options),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("a world of 4 ranks needs a store (SHARDKIT_STORE")));
}

TEST_F(CompleteForLauncherTest, MpiNeedsNothing) {
  ConnectOptions options;
  options.backend = "mpi";
  EXPECT_THAT(CompleteForLauncher(*Detect(kOpenMpi), &options), IsOk());
  EXPECT_EQ(options.store_url, "");
  EXPECT_EQ(options.hostname, "");
}

TEST_F(CompleteForLauncherTest, StoreNamespaceIsTheLaunchersRunId) {
  ConnectOptions options;
  options.store_url = StoreUrl();
  options.hostname = "10.1.2.3";
  ASSERT_THAT(CompleteForLauncher(*Detect(kSlurmStep), &options), IsOk());
  EXPECT_EQ(options.store_url, StoreUrl() + "/812.3");
  EXPECT_EQ(options.hostname, "10.1.2.3");
}

// mpirun gives no run id: agreed through the store, once per process (a second Connect of the
// same rank must not count as joining another job).
TEST_F(CompleteForLauncherTest, RunIdWithoutOneFromTheLauncherIsAgreedOnce) {
  for (int call = 0; call < 2; ++call) {
    ConnectOptions options;
    options.store_url = StoreUrl();
    options.ifname = "lo";
    ASSERT_THAT(CompleteForLauncher(*Detect(kOpenMpi), &options), IsOk());
    EXPECT_EQ(options.store_url, StoreUrl() + "/job-w4-0");
    EXPECT_EQ(options.hostname, "");
  }
}

// A tcp:// store is served by rank 0 for this run alone: no agreement (nobody serves it yet).
TEST_F(CompleteForLauncherTest, TcpStoreWithoutRunIdKeepsItsUrl) {
  ConnectOptions options;
  options.store_url = "tcp://127.0.0.1:29511";
  options.ifname = "lo";
  ASSERT_THAT(CompleteForLauncher(*Detect(kOpenMpi), &options), IsOk());
  EXPECT_EQ(options.store_url, "tcp://127.0.0.1:29511");
  ASSERT_THAT(CompleteForLauncher(*Detect(kSlurmStep), &options), IsOk());
  EXPECT_EQ(options.store_url, "tcp://127.0.0.1:29511/812.3");
}

TEST_F(CompleteForLauncherTest, AddressDefaultsToWhatTheHostNameResolvesTo) {
  ConnectOptions options;
  options.store_url = StoreUrl();
  absl::Status status = CompleteForLauncher(*Detect(kTorchrun), &options);
  if (status.code() == StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "this machine's host name does not resolve: " << status.message();
  }
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(options.store_url, StoreUrl() + "/job7");
  unsigned char bytes[16];
  EXPECT_TRUE(inet_pton(AF_INET, options.hostname.c_str(), bytes) == 1 ||
              inet_pton(AF_INET6, options.hostname.c_str(), bytes) == 1)
      << options.hostname;
}

// `shardkit launch` already made the namespace and chose the address.
TEST_F(CompleteForLauncherTest, ShardkitLaunchIsLeftAlone) {
  ConnectOptions options;
  options.store_url = StoreUrl();
  ASSERT_THAT(CompleteForLauncher(*Detect({{"SHARDKIT_RANK", "0"}, {"SHARDKIT_WORLD_SIZE", "2"}}),
                                  &options),
              IsOk());
  EXPECT_EQ(options.store_url, StoreUrl());
  EXPECT_EQ(options.hostname, "");
}

}  // namespace
}  // namespace shardkit
