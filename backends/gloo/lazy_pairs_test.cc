// The Gloo backend makes its payload pairs on first use (lazy_context.h): socket counts after
// scatters at world 8 (n-1 new connections on the root, 1 on the others, none the second time),
// and the faults of the connect step itself (a peer that never comes, a peer killed meanwhile).
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::RankOptions;
using ::shardkit::testing::RunRanks;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;

constexpr int kWorld = 8;

// The process's open sockets: the entries of /proc/self/fd that link to "socket:[inode]".
int SocketCount() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    char target[64] = {};
    const std::string path = absl::StrCat("/proc/self/fd/", entry->d_name);
    if (readlink(path.c_str(), target, sizeof(target) - 1) > 0 &&
        absl::StartsWith(target, "socket:")) {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

// A scatter from `root` of one byte pattern per rank; checks what this rank received.
void ScatterFrom(Communicator& comm, int root) {
  std::vector<std::vector<uint8_t>> parts;
  std::vector<ConstBuffer> sends;
  for (int r = 0; r < kWorld; ++r) parts.emplace_back(1024, static_cast<uint8_t>(root * 16 + r));
  if (comm.rank() == root) {
    for (const std::vector<uint8_t>& part : parts) sends.emplace_back(part);
  }
  std::vector<uint8_t> mine(1024);
  SHARDKIT_ASSERT_OK(comm.Scatter(sends, MutableBuffer(mine), root));
  EXPECT_THAT(mine, Each(static_cast<uint8_t>(root * 16 + comm.rank())));
}

// Counted relative to right after Connect: the control mesh (agreement, barriers) still connects
// every pair of ranks at Connect, so only the payload pairs are counted here. With Gloo's full
// mesh these were made at Connect too, and every delta below would be 0.
TEST(GlooLazyPairs, ScatterConnectsOnlyTheRootsPairs) {
  SHARDKIT_EXPECT_OK(RunRanks(kWorld, "gloo", [](int rank, Communicator& comm) {
    const int at_connect = SocketCount();
    ASSERT_GT(at_connect, 0);
    ScatterFrom(comm, /*root=*/0);
    const int after_first = SocketCount();
    if (rank == 0) {
      // One connection per peer (each pair's listening socket is closed once it connects).
      EXPECT_GE(after_first - at_connect, kWorld - 1);
      EXPECT_LE(after_first - at_connect, kWorld + 1);
    } else {
      EXPECT_GE(after_first - at_connect, 1);
      EXPECT_LE(after_first - at_connect, 2) << "a non-root connected to more than the root";
    }
    // The same scatter again reuses the pairs.
    ScatterFrom(comm, /*root=*/0);
    EXPECT_EQ(SocketCount(), after_first);
    // A scatter from rank 5: rank 5 connects to the 6 ranks it had no pair with; rank 0 and 5
    // already share one.
    ScatterFrom(comm, /*root=*/5);
    const int gained = SocketCount() - after_first;
    if (rank == 5) {
      EXPECT_GE(gained, kWorld - 2);
      EXPECT_LE(gained, kWorld);
    } else if (rank == 0) {
      EXPECT_EQ(gained, 0);
    } else {
      EXPECT_GE(gained, 1);
      EXPECT_LE(gained, 2);
    }
    SHARDKIT_EXPECT_OK(comm.Barrier());
  }));
}

// Every rank sends to every other: each rank ends with a pair to each peer, made in one step
// (half of them connect actively, half wait for the peer: no order of arrival deadlocks).
TEST(GlooLazyPairs, AllToAllConnectsEveryPair) {
  SHARDKIT_EXPECT_OK(RunRanks(kWorld, "gloo", [](int rank, Communicator& comm) {
    const int at_connect = SocketCount();
    usleep(rank * 20000);  // ranks arrive in turn
    std::vector<std::vector<uint8_t>> out, in(kWorld, std::vector<uint8_t>(256));
    std::vector<ConstBuffer> sends;
    std::vector<MutableBuffer> recvs;
    for (int r = 0; r < kWorld; ++r) out.emplace_back(256, static_cast<uint8_t>(rank * 16 + r));
    for (int r = 0; r < kWorld; ++r) {
      sends.emplace_back(out[r]);
      recvs.emplace_back(in[r]);
    }
    SHARDKIT_ASSERT_OK(comm.AllToAll(sends, recvs));
    for (int r = 0; r < kWorld; ++r) EXPECT_THAT(in[r], Each(static_cast<uint8_t>(r * 16 + rank)));
    const int gained = SocketCount() - at_connect;
    EXPECT_GE(gained, kWorld - 1);
    EXPECT_LE(gained, kWorld + 1);
    // No rank leaves (and so closes its pairs, which Gloo closes here too) before all have counted.
    SHARDKIT_EXPECT_OK(comm.Barrier());
  }));
}

TEST(GlooLazyPairs, PeerThatNeverExchangesIsNamed) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "gloo", [](int rank, Communicator& comm) {
    if (rank == 1) {
      usleep(1200000);  // never sends; rank 0's deadline passes meanwhile
      return;
    }
    std::vector<uint8_t> data(1024);
    std::vector<ConstBuffer> sends(2);
    sends[1] = ConstBuffer(data);
    CallOptions soon;
    soon.timeout = absl::Milliseconds(300);
    const absl::Time start = absl::Now();
    EXPECT_THAT(internal::RawExchange(comm, sends, {}, soon),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr("connecting Gloo pair to rank 1"),
                               HasSubstr("before rank 1 published its address"))));
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(1000));
  }));
}

// A peer killed before it connects: the peer watch ends the wait for its address at once.
TEST(GlooLazyPairs, PeerKilledBeforeConnectingFailsAtOnce) {
  RankOptions options;
  options.may_die = {1};
  options.timeout = absl::Seconds(15);
  SHARDKIT_EXPECT_OK(RunRanks(
      2, "gloo",
      [](int rank, Communicator& comm) {
        if (rank == 1) {
          usleep(300000);
          raise(SIGKILL);
        }
        std::vector<uint8_t> data(1024);
        std::vector<MutableBuffer> recvs(2);
        recvs[1] = MutableBuffer(data);
        const absl::Time start = absl::Now();
        EXPECT_THAT(internal::RawExchange(comm, {}, recvs, {}),
                    StatusIs(absl::StatusCode::kUnavailable,
                             AllOf(HasSubstr("connecting Gloo pair to rank 1"),
                                   HasSubstr("rank 1 went away"))));
        EXPECT_LT(absl::Now() - start, absl::Seconds(3)) << "must not wait for the 15 s deadline";
      },
      options));
}

}  // namespace
}  // namespace shardkit
