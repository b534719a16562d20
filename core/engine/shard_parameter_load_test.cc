// Load: 1,000 small ShardParameter calls back to back on 4 forked ranks over real Gloo (one
// group, one communicator). No call may leak a file descriptor, and the resident set must stay
// flat: after a warm-up, neither the fd count nor (loosely) the RSS may grow. Rank 0 prints the
// RSS curve every 100 calls to the test log.
//
// Under ASan/TSan the RSS bound is not checked (the sanitizers' quarantine and shadow memory grow
// the resident set by design); the fd check still runs.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "core/os/proc_status.h"
#include "specs/spec_json.h"
#include "testing/rank_group.h"
#include "testing/sanitizers.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::RankGroup;

using ::shardkit::testing::kSanitized;

constexpr int kWorld = 4;
constexpr int kCalls = 1000;
constexpr int kWarmUpCalls = 10;
constexpr int kReportEvery = 100;
// Loose: 1,000 calls that each leaked even one 16x4 float tensor (256 B) plus its bookkeeping
// would still pass, but any per-call buffer of a few KiB would not.
constexpr int64_t kMaxRssGrowthBytes = int64_t{8} << 20;

int OpenFds() {
  int count = 0;
  return os::ForEachOpenFd([&](int) { ++count; }).ok() ? count : -1;
}

int64_t RssBytes() { return os::ProcStatusBytes("VmRSS").value_or(-1); }

void OneCall(int rank, Communicator& comm, const specs::ShardingSpec& spec) {
  Module module;
  absl::StatusOr<Tensor> tensor = rank == 0 ? Tensor::Arange({16, 4}, DType::kFloat32, rank)
                                            : Tensor::Meta({16, 4}, DType::kFloat32);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  ASSERT_THAT(module.AddParameter("w", *tensor), testing::IsOk());
  ASSERT_THAT(ShardParameter(module, "w", spec, comm), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* sharded, module.GetSharded("w"));
  ASSERT_EQ(sharded->local_shards().size(), 1u);
}

void LoadCase(int rank, Communicator& comm, std::string_view) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      specs::ShardingSpec spec,
      specs::ParseSpec(R"({"type": "chunk", "dim": 0, "placements": {"ranks": "all"}})"));
  for (int i = 0; i < kWarmUpCalls; ++i) ASSERT_NO_FATAL_FAILURE(OneCall(rank, comm, spec));
  const int fds_before = OpenFds();
  const int64_t rss_before = RssBytes();
  if (rank == 0) {
    std::printf("rank 0 after %d warm-up calls: RSS %.2f MiB, %d open fds\n", kWarmUpCalls,
                rss_before / 1048576.0, fds_before);
  }
  for (int i = 1; i <= kCalls; ++i) {
    ASSERT_NO_FATAL_FAILURE(OneCall(rank, comm, spec)) << "call " << i;
    if (rank == 0 && i % kReportEvery == 0) {
      std::printf("rank 0 call %4d: RSS %.2f MiB (%+.1f KiB), %d open fds\n", i,
                  RssBytes() / 1048576.0, (RssBytes() - rss_before) / 1024.0, OpenFds());
      std::fflush(stdout);
    }
  }
  const int fds_after = OpenFds();
  const int64_t rss_after = RssBytes();
  std::printf("rank %d: fds %d -> %d, RSS %.2f -> %.2f MiB over %d calls\n", rank, fds_before,
              fds_after, rss_before / 1048576.0, rss_after / 1048576.0, kCalls);
  std::fflush(stdout);
  EXPECT_EQ(fds_after, fds_before) << "rank " << rank << " leaked file descriptors";
  if (!kSanitized) {
    EXPECT_LT(rss_after - rss_before, kMaxRssGrowthBytes) << "rank " << rank << " RSS grew";
  }
}

TEST(ShardParameterLoadTest, ThousandCallsLeakNoFdsAndKeepRssFlat) {
  testing::RankOptions options;
  options.deadline = absl::Seconds(kSanitized ? 600 : 240);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RankGroup> group,
                                RankGroup::Start(kWorld, "gloo", options));
  SHARDKIT_EXPECT_OK(group->Run(&LoadCase));
}

}  // namespace
}  // namespace shardkit
