// Connections are made on first use (Gloo pairs: lazy_context.h; control connections:
// backends/socket_mesh): the exact TCP connection counts (/proc/self/fd) after scatters and an
// all-to-all at worlds 8 and 32, and the faults of the connect step itself (a peer that never
// comes, a peer killed meanwhile).
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/comm/agreement_tree.h"
#include "core/comm/communicator.h"
#include "core/os/proc_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/faults.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::RankOptions;
using ::shardkit::testing::RunRanks;
using ::shardkit::testing::SharedTime;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;

// The connections rank `rank` of `n` holds once its exchanges have involved `payload_peers`:
// one control connection to each of its agreement-tree peers and one Gloo pair to each payload
// peer (the peer watch looks at the pairs' own sockets).
int ExpectedConnections(int rank, int n, const std::set<int>& payload_peers) {
  return static_cast<int>(TreePeers(rank, n).size() + payload_peers.size());
}

// This rank's TCP connections now.
int Connections() { return os::CountTcpConnections().value_or(-1); }

// A scatter from `root` of one byte pattern per rank; checks what this rank received.
void ScatterFrom(Communicator& comm, int root) {
  std::vector<std::vector<uint8_t>> parts;
  std::vector<ConstBuffer> sends;
  for (int r = 0; r < comm.world_size(); ++r) {
    parts.emplace_back(1024, static_cast<uint8_t>(root * 16 + r));
  }
  if (comm.rank() == root) {
    for (const std::vector<uint8_t>& part : parts) sends.emplace_back(part);
  }
  std::vector<uint8_t> mine(1024);
  SHARDKIT_ASSERT_OK(comm.Scatter(sends, MutableBuffer(mine), root));
  EXPECT_THAT(mine, Each(static_cast<uint8_t>(root * 16 + comm.rank())));
}

// The payload peers of a scatter from `root`, as seen by `rank`.
std::set<int> ScatterPeers(int rank, int n, int root) {
  std::set<int> peers;
  for (int r = 0; r < n; ++r) {
    if (r != rank && (rank == root || r == root)) peers.insert(r);
  }
  return peers;
}

class GlooLazyPairs : public ::testing::TestWithParam<int> {};

// Connect connects only the agreement's tree; a scatter from rank 0 adds the root's pairs only
// (issue 21's bound on a non-root: 2·log2(n) + 2), the same scatter again connects nothing, and one
// from rank 5 adds rank 5's pairs.
TEST_P(GlooLazyPairs, ScatterConnectsOnlyWhatItUses) {
  const int n = GetParam();
  SHARDKIT_EXPECT_OK(RunRanks(n, "gloo", [n](int rank, Communicator& comm) {
    // Connect's own AllGather (backend_loader.cc) has connected the agreement's tree; anything
    // else is the store's (a TCP or Redis store holds one connection).
    const int at_connect = Connections() - static_cast<int>(TreePeers(rank, n).size());
    ASSERT_GE(at_connect, 0);
    ScatterFrom(comm, /*root=*/0);
    std::set<int> peers = ScatterPeers(rank, n, 0);
    const int after_first = Connections() - at_connect;
    EXPECT_EQ(after_first, ExpectedConnections(rank, n, peers));
    // Issue 21's bounds: 2·log2(n) + 2 on a non-root, n - 1 + 2·log2(n) on the root.
    EXPECT_LE(after_first, (rank == 0 ? n - 1 : 2) + 2 * std::log2(n));
    ScatterFrom(comm, /*root=*/0);
    EXPECT_EQ(Connections() - at_connect, after_first);
    ScatterFrom(comm, /*root=*/5);
    const std::set<int> from_five = ScatterPeers(rank, n, 5);
    peers.insert(from_five.begin(), from_five.end());
    EXPECT_EQ(Connections() - at_connect, ExpectedConnections(rank, n, peers));
    // No rank leaves (and so closes its connections) before all have counted.
    SHARDKIT_EXPECT_OK(comm.Barrier());
  }));
}

// Every rank sends to every other: each rank ends with a pair to each peer, made in one step
// (half of them connect actively, half wait for the peer: no order of arrival deadlocks).
TEST_P(GlooLazyPairs, AllToAllConnectsEveryPair) {
  const int n = GetParam();
  SHARDKIT_EXPECT_OK(RunRanks(n, "gloo", [n](int rank, Communicator& comm) {
    const int at_connect = Connections() - static_cast<int>(TreePeers(rank, n).size());
    usleep(rank * 160000 / n);  // ranks arrive in turn
    std::vector<std::vector<uint8_t>> out, in(n, std::vector<uint8_t>(256));
    std::vector<ConstBuffer> sends;
    std::vector<MutableBuffer> recvs;
    for (int r = 0; r < n; ++r) out.emplace_back(256, static_cast<uint8_t>(rank * 16 + r));
    for (int r = 0; r < n; ++r) {
      sends.emplace_back(out[r]);
      recvs.emplace_back(in[r]);
    }
    SHARDKIT_ASSERT_OK(comm.AllToAll(sends, recvs));
    for (int r = 0; r < n; ++r) EXPECT_THAT(in[r], Each(static_cast<uint8_t>(r * 16 + rank)));
    EXPECT_EQ(Connections() - at_connect,
              ExpectedConnections(rank, n, ScatterPeers(rank, n, rank)));
    SHARDKIT_EXPECT_OK(comm.Barrier());
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooLazyPairs, ::testing::Values(8, 32),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("World", info.param);
                         });

TEST(GlooLazyPairFaults, PeerThatNeverExchangesIsNamed) {
  SharedTime checked;
  SHARDKIT_EXPECT_OK(RunRanks(2, "gloo", [&checked](int rank, Communicator& comm) {
    if (rank == 1) {
      checked.Await();  // never sends; rank 0's deadline passes meanwhile
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
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(2300));
    checked.Stamp();
  }));
}

// A peer killed before it connects: the peer watch ends the wait for its address at once.
TEST(GlooLazyPairFaults, PeerKilledBeforeConnectingFailsAtOnce) {
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
