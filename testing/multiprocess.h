// Multiprocess test fixtures: run a function on every rank of a real communicator, one forked
// process per rank (real backend, real TCP on 127.0.0.1, FileStore under $TEST_TMPDIR), or one
// thread per rank (MemoryStore) for fast unit tests.
//
//   TEST(Gloo, Broadcast) {
//     SHARDKIT_EXPECT_OK(RunRanks(3, "gloo", [](int rank, Communicator& comm) {
//       std::vector<int> v(4, rank);
//       SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(v), /*root=*/0));
//       EXPECT_THAT(v, Each(0));
//     }));
//   }
//
// Each child reports its gtest failures (EXPECT/ASSERT in fn) to the parent over a pipe; the
// returned Status names every failed rank with its failures, every rank that exited abnormally,
// and every rank that did not finish by the deadline ("rank 2 did not finish within 20 s"; it is
// killed). Children run in one process group, are killed with the test process
// (PR_SET_PDEATHSIG) and are always reaped: no zombies, no orphans.
//
// A fresh group costs a rendezvous (30–60 ms per rank); to run many cases on one group, use
// RankGroup (testing/rank_group.h).
#ifndef SHARDKIT_TESTING_MULTIPROCESS_H_
#define SHARDKIT_TESTING_MULTIPROCESS_H_

#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"
#include "testing/test_dir.h"  // FreshTestDir, for the users of this header

namespace shardkit::testing {

struct RankOptions {
  // Wall-clock limit for the whole run (per case for RankGroup); late ranks are killed and named.
  absl::Duration deadline = absl::Seconds(20);
  // The communicators' default per-call (and rendezvous) timeout.
  absl::Duration timeout = absl::Seconds(10);
  // ForkRanks/RunRanks: ranks that are not started at all (a rank that "never joins").
  std::set<int> absent;
  // Ranks that may end by a signal (a test that SIGKILLs them) without it being a failure.
  std::set<int> may_die;
};

// ConnectOptions for `rank` of a test world of `world_size` on this machine: one device per rank
// (local_rank = rank, for NCCL) and the fixture's per-call timeout. The caller adds the store
// (store_url or store).
ConnectOptions RankConnectOptions(int rank, int world_size, std::string_view backend,
                                  const RankOptions& options);

// The backend a test that runs on several backends uses: $SHARDKIT_TEST_BACKEND (a second
// target of the same test sets it, e.g. //core/engine:sync_ucx_test), else "gloo".
std::string TestBackend();

// Forks one process per rank (except options.absent) running fn(rank, store_url), where
// store_url names a fresh FileStore directory under $TEST_TMPDIR shared by the ranks.
// Errors: kInternal listing the failed ranks (see the file comment).
[[nodiscard]] absl::Status ForkRanks(
    int world_size, const std::function<void(int rank, const std::string& store_url)>& fn,
    const RankOptions& options = {});

// ForkRanks, with each rank first connected to `backend` (a failed Connect is that rank's
// failure) and then running fn(rank, communicator).
[[nodiscard]] absl::Status RunRanks(int world_size, std::string_view backend,
                                    const std::function<void(int rank, Communicator& comm)>& fn,
                                    const RankOptions& options = {});

// Like RunRanks, with one thread per rank in this process and a shared MemoryStore. gtest
// failures are recorded directly. Errors: the first failed Connect (annotated with its rank).
[[nodiscard]] absl::Status RunRanksInThreads(
    int world_size, std::string_view backend,
    const std::function<void(int rank, Communicator& comm)>& fn, const RankOptions& options = {});

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_MULTIPROCESS_H_
