// PeerWatch over a real control mesh between forked ranks: which departures abort a waiting
// exchange (a killed peer, a peer that gave up on this call) and which do not (a goodbye, a peer
// that gave up on a later call), that the departure carries a gave-up peer's cause, and that
// nothing aborts after Disarm or Stop.
#include "backends/gloo/peer_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "backends/socket_mesh/socket_mesh.h"
#include "core/store/store_url.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit::gloo_backend {
namespace {

using ::shardkit::testing::ForkRanks;
using ::shardkit::testing::RankOptions;
using How = SocketMesh::Departure::How;

std::unique_ptr<SocketMesh> ConnectMesh(const std::string& store_url, int rank, int world = 2) {
  // Open for the rank's (forked process's) life: the mesh reads addresses when it connects peers.
  static absl::StatusOr<std::unique_ptr<Store>>& store =
      *new absl::StatusOr<std::unique_ptr<Store>>(OpenStore(store_url));
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return nullptr;
  sockaddr_storage address{};
  auto* in = reinterpret_cast<sockaddr_in*>(&address);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  absl::StatusOr<std::unique_ptr<SocketMesh>> mesh =
      SocketMesh::Connect(**store, "test", rank, world, address, absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return mesh.ok() ? *std::move(mesh) : nullptr;
}

// Rank 1 leaves in the way `leave` says while rank 0 watches it during call 3; returns (on rank
// 0) whether the watch aborted within `wait`, and the departure it reported.
struct Outcome {
  bool aborted = false;
  std::optional<SocketMesh::Departure> lost;
};
Outcome WatchWhileRank1Leaves(SocketMesh& mesh, absl::Duration wait) {
  PeerWatch watch(mesh);
  std::atomic<bool> aborted{false};
  watch.Arm({1}, /*call=*/3, [&] { aborted = true; });
  const absl::Time until = absl::Now() + wait;
  while (!aborted && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  Outcome outcome;
  outcome.lost = watch.Disarm();
  outcome.aborted = aborted;
  return outcome;
}

// A message exchanged first, so that rank 1's parting marker follows real traffic.
void ExchangeOnce(SocketMesh& mesh, int rank, uint64_t call) {
  std::array<uint64_t, 2> mine{1, 2}, theirs{};
  std::vector<SocketMesh::Send> sends = {{1 - rank, &mine, sizeof(mine)}};
  std::vector<SocketMesh::Recv> recvs = {{1 - rank, &theirs, sizeof(theirs)}};
  SHARDKIT_EXPECT_OK(mesh.Exchange(sends, recvs, absl::Now() + absl::Seconds(10), call));
}

TEST(PeerWatch, KilledPeerAbortsAtOnce) {
  RankOptions options;
  options.may_die = {1};
  SHARDKIT_EXPECT_OK(ForkRanks(
      2,
      [&](int rank, const std::string& url) {
        std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank);
        ASSERT_NE(mesh, nullptr);
        ExchangeOnce(*mesh, rank, 3);
        if (rank == 1) raise(SIGKILL);
        const absl::Time start = absl::Now();
        const Outcome outcome = WatchWhileRank1Leaves(*mesh, absl::Seconds(10));
        EXPECT_TRUE(outcome.aborted);
        EXPECT_LT(absl::Now() - start, absl::Seconds(2));
        ASSERT_TRUE(outcome.lost.has_value());
        EXPECT_EQ(outcome.lost->peer, 1);
        EXPECT_EQ(outcome.lost->how, How::kVanished);
      },
      options));
}

TEST(PeerWatch, PeerThatGaveUpOnThisCallAborts) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank);
    ASSERT_NE(mesh, nullptr);
    ExchangeOnce(*mesh, rank, 3);
    if (rank == 1) {
      usleep(200000);  // rank 0 has finished the exchange (else it would fail it: rank 1 gave up)
      mesh->Close();   // gives up during call 3
      usleep(300000);
      return;
    }
    const Outcome outcome = WatchWhileRank1Leaves(*mesh, absl::Seconds(10));
    EXPECT_TRUE(outcome.aborted);
    ASSERT_TRUE(outcome.lost.has_value());
    EXPECT_EQ(outcome.lost->how, How::kGaveUp);
    EXPECT_EQ(outcome.lost->call, 3u);
    EXPECT_EQ(outcome.lost->cause, -1);  // an error of its own
  }));
}

// Rank 1 gives up because rank 2 (a payload peer, say) vanished: the departure names rank 2.
TEST(PeerWatch, DepartureOfAPeerThatGaveUpCarriesItsCause) {
  SHARDKIT_EXPECT_OK(ForkRanks(3, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 3);
    ASSERT_NE(mesh, nullptr);
    if (rank == 2) return;  // never connected to the mesh
    ExchangeOnce(*mesh, rank, 3);
    if (rank == 1) {
      usleep(200000);
      mesh->Close(/*cause=*/2);
      usleep(300000);
      return;
    }
    const Outcome outcome = WatchWhileRank1Leaves(*mesh, absl::Seconds(10));
    EXPECT_TRUE(outcome.aborted);
    ASSERT_TRUE(outcome.lost.has_value());
    EXPECT_EQ(outcome.lost->how, How::kGaveUp);
    EXPECT_EQ(outcome.lost->cause, 2);
    EXPECT_EQ(SocketMesh::DescribeDeparture(*outcome.lost),
              "rank 1 gave up after rank 2 went away without closing its communicator (killed or "
              "crashed?)");
  }));
}

// A goodbye, or giving up on a later call, means rank 1 finished its part of call 3: its data
// may still be in flight, so the exchange must not be aborted.
TEST(PeerWatch, GoodbyeOrGivingUpLaterDoesNotAbort) {
  for (const bool gave_up_later : {false, true}) {
    SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
      std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank);
      ASSERT_NE(mesh, nullptr);
      ExchangeOnce(*mesh, rank, 3);
      if (rank == 1) {
        if (gave_up_later) {
          ExchangeOnce(*mesh, rank, 4);  // call 4 with rank 0, which then watches call 3
          usleep(200000);                // rank 0 has finished call 4 by now
          mesh->Close();                 // "gave up on call 4"
        }
        return;  // the mesh is destroyed: goodbye (after Close: nothing more)
      }
      if (gave_up_later) ExchangeOnce(*mesh, rank, 4);
      const Outcome outcome = WatchWhileRank1Leaves(*mesh, absl::Milliseconds(400));
      EXPECT_FALSE(outcome.aborted) << (gave_up_later ? "gave up on call 4" : "goodbye");
      EXPECT_FALSE(outcome.lost.has_value());
    }));
  }
}

TEST(PeerWatch, NothingAbortsAfterDisarmOrStop) {
  RankOptions options;
  options.may_die = {1};
  SHARDKIT_EXPECT_OK(ForkRanks(
      2,
      [&](int rank, const std::string& url) {
        std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank);
        ASSERT_NE(mesh, nullptr);
        ExchangeOnce(*mesh, rank, 3);
        if (rank == 1) {
          usleep(200000);
          raise(SIGKILL);
        }
        std::atomic<int> aborts{0};
        {
          PeerWatch watch(*mesh);
          watch.Arm({1}, 3, [&] { ++aborts; });
          EXPECT_FALSE(watch.Disarm().has_value());  // before rank 1 dies
          absl::SleepFor(absl::Milliseconds(400));   // it dies now, unwatched
          EXPECT_EQ(aborts.load(), 0);
          watch.Stop();
          watch.Arm({1}, 3, [&] { ++aborts; });  // after Stop: watches nothing
          absl::SleepFor(absl::Milliseconds(200));
          EXPECT_FALSE(watch.Disarm().has_value());
        }
        EXPECT_EQ(aborts.load(), 0);
      },
      options));
}

}  // namespace
}  // namespace shardkit::gloo_backend
