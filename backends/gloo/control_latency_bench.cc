// Latency of small all-to-all exchanges among WORLD (default 4) forked ranks, through the control
// mesh (AllGather of a 33-byte digest, Barrier: the agreement's path) and through Gloo's own
// transport (RawExchange of 128 bytes per pair: what the agreement cost before the mesh).
//   WORLD=4 bazel run //backends/gloo:control_latency_bench
// Prints p10 / median / p90 per rank. Manual: timings, not assertions.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/time/clock.h"
#include "core/comm/communicator.h"
#include "gtest/gtest.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

constexpr int kRounds = 300;

int World() {
  const char* world = std::getenv("WORLD");
  return world != nullptr ? std::atoi(world) : 4;
}

void Report(const char* what, int rank, std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  std::printf("%-24s rank %d: p10 %7.1f us  median %7.1f us  p90 %7.1f us\n", what, rank,
              seconds[seconds.size() / 10] * 1e6, seconds[seconds.size() / 2] * 1e6,
              seconds[seconds.size() * 9 / 10] * 1e6);
  std::fflush(stdout);  // ranks are forked children that end with _exit
}

template <typename Fn>
std::vector<double> Time(Fn&& fn) {
  std::vector<double> seconds;
  for (int i = 0; i < kRounds; ++i) {
    const absl::Time start = absl::Now();
    fn();
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  return seconds;
}

TEST(ControlLatency, MeshAndGloo) {
  SHARDKIT_EXPECT_OK(testing::RunRanks(World(), "gloo", [](int rank, Communicator& comm) {
    const int n = comm.world_size();
    const char digest[33] = {};
    std::vector<char> out(n * 128), in(n * 128);
    std::vector<ConstBuffer> sends(n);
    std::vector<MutableBuffer> recvs(n);
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      sends[peer] = ConstBuffer(&out[peer * 128], 128);
      recvs[peer] = MutableBuffer(&in[peer * 128], 128);
    }
    const auto all_gather =
        Time([&] { SHARDKIT_ASSERT_OK(comm.AllGather(ConstBuffer(digest)).status()); });
    const auto barrier = Time([&] { SHARDKIT_ASSERT_OK(comm.Barrier()); });
    const auto gloo =
        Time([&] { SHARDKIT_ASSERT_OK(internal::RawExchange(comm, sends, recvs, {})); });
    Report("mesh AllGather 33 B", rank, all_gather);
    Report("mesh Barrier", rank, barrier);
    Report("gloo all-to-all 128 B", rank, gloo);
  }));
}

}  // namespace
}  // namespace shardkit
