// SocketMesh's connections made on demand, over real forked processes and real TCP on
// 127.0.0.1: only the peers of exchanges are connected, a higher rank that dials early is kept,
// peers that never connect are named, and departures and markers involve connected peers only.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/socket_mesh/socket_mesh.h"
#include "backends/socket_mesh/socket_mesh_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/faults.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::socket_mesh_testing::ConnectMesh;
using ::shardkit::socket_mesh_testing::ExchangeWords;
using ::shardkit::socket_mesh_testing::Word;
using ::shardkit::testing::ForkRanks;
using ::shardkit::testing::RankOptions;
using ::shardkit::testing::SharedTime;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::StrEq;
using How = SocketMesh::Departure::How;

// Connect connects nothing; an exchange with the neighbours connects just them.
TEST(SocketMeshConnect, ConnectionsAreMadeOnlyForExchanges) {
  constexpr int kWorld = 8;
  SHARDKIT_EXPECT_OK(ForkRanks(kWorld, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, kWorld);
    ASSERT_NE(mesh, nullptr);
    EXPECT_EQ(mesh->connections(), 0);
    std::vector<int> neighbours;
    if (rank > 0) neighbours.push_back(rank - 1);
    if (rank < kWorld - 1) neighbours.push_back(rank + 1);
    for (uint64_t call = 1; call <= 2; ++call) {
      SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, rank, neighbours, call));
      EXPECT_EQ(mesh->connections(), static_cast<int>(neighbours.size()));
    }
  }));
}

// Rank 3 dials rank 0 for their exchange while rank 0 still waits for rank 1 (late): rank 0 keeps
// rank 3's connection and later exchanges over it without accepting again.
TEST(SocketMeshConnect, EarlyConnectionFromAHigherRankIsKept) {
  SharedTime rank3_dials;
  SHARDKIT_EXPECT_OK(ForkRanks(4, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 4);
    ASSERT_NE(mesh, nullptr);
    switch (rank) {
      case 0:
        SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, 0, {1}, 1));
        EXPECT_EQ(mesh->connections(), 2) << "rank 3's early connection was not kept";
        SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, 0, {3}, 2));
        EXPECT_EQ(mesh->connections(), 2);
        break;
      case 1:
        // Rank 3 dials rank 0 first (it has called; its dial takes far less than 300 ms).
        ASSERT_TRUE(rank3_dials.Await().has_value());
        usleep(300000);
        SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, 1, {0}, 1));
        break;
      case 3:
        rank3_dials.Stamp();
        SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, 3, {0}, 2));
        EXPECT_EQ(mesh->connections(), 1);
        break;
      default:
        EXPECT_EQ(mesh->connections(), 0);
    }
  }));
}

// A higher rank that never connects is named at the deadline; a lower one that never published.
TEST(SocketMeshConnect, PeerThatNeverConnectsIsNamed) {
  RankOptions options;
  options.absent = {0, 3};
  SHARDKIT_EXPECT_OK(ForkRanks(
      4,
      [&](int rank, const std::string& url) {
        std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 4);
        ASSERT_NE(mesh, nullptr);
        const absl::Time start = absl::Now();
        const std::vector<int> peers = {3 - rank, 3};  // rank 1: 2, 3; rank 2: 1, 3
        const absl::Status status = mesh->EnsureConnected(peers, start + absl::Milliseconds(500));
        EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
        EXPECT_LT(absl::Now() - start, absl::Milliseconds(1500));
        EXPECT_THAT(status,
                    StatusIs(absl::StatusCode::kDeadlineExceeded,
                             HasSubstr(absl::StrCat("rank 3 did not connect to rank ", rank))));
        EXPECT_EQ(mesh->connections(), 1);  // ranks 1 and 2 connected each other
        Word word{};
        std::vector<SocketMesh::Recv> recvs = {{0, &word, sizeof(word)}};
        EXPECT_THAT(mesh->Exchange({}, recvs, absl::Now() + absl::Milliseconds(300)),
                    StatusIs(absl::StatusCode::kDeadlineExceeded,
                             HasSubstr("rank 0 did not publish its address")));
      },
      options));
}

// Over lazily connected peers, a killed peer is a departure; one never connected is not.
TEST(SocketMeshConnect, KilledPeerIsSeenButNeverConnectedOnesAreNot) {
  RankOptions options;
  options.may_die = {1, 2};
  SHARDKIT_EXPECT_OK(ForkRanks(
      3,
      [&](int rank, const std::string& url) {
        std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 3);
        ASSERT_NE(mesh, nullptr);
        if (rank == 2) raise(SIGKILL);  // published its address, never connected
        SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, rank, {1 - rank}, 1));
        if (rank == 1) raise(SIGKILL);
        const absl::Time start = absl::Now();
        EXPECT_THAT(mesh->Departures(std::vector<int>{1, 2}, absl::Seconds(10)),
                    ElementsAre(AllOf(Field(&SocketMesh::Departure::peer, 1),
                                      Field(&SocketMesh::Departure::how, How::kVanished))));
        EXPECT_LT(absl::Now() - start, absl::Seconds(5));
        EXPECT_THAT(mesh->DescribeDepartures(),
                    StrEq("rank 1 went away without closing its communicator (killed "
                          "or crashed?)"));
      },
      options));
}

// Close tells the connected peer that this rank gave up, and refuses later dials at once.
TEST(SocketMeshConnect, CloseMarksConnectedPeersAndRefusesLaterOnes) {
  // The ranks' order, shown to each other rather than guessed with sleeps.
  SharedTime call7_done, closed, refused;
  SHARDKIT_EXPECT_OK(ForkRanks(3, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 3);
    ASSERT_NE(mesh, nullptr);
    if (rank == 0) {
      SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, 0, {1}, 7));
      // Rank 1 has finished call 7: the marker cannot fail it.
      ASSERT_TRUE(call7_done.Await().has_value());
      mesh->Close();
      closed.Stamp();
      EXPECT_EQ(mesh->connections(), 0);
      // Still alive: rank 2 is refused by the closed mesh, not an exited process.
      EXPECT_TRUE(refused.Await().has_value());
      return;
    }
    if (rank == 1) {
      SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, 1, {0}, 7));
      call7_done.Stamp();
      EXPECT_THAT(mesh->Departures(std::vector<int>{0, 2}, absl::Seconds(10)),
                  ElementsAre(AllOf(Field(&SocketMesh::Departure::how, How::kGaveUp),
                                    Field(&SocketMesh::Departure::call, 7u))));
      return;
    }
    ASSERT_TRUE(closed.Await().has_value());
    const absl::Time start = absl::Now();
    EXPECT_THAT(ExchangeWords(*mesh, 2, {0}, 8, absl::Seconds(10)),
                StatusIs(absl::StatusCode::kUnavailable,
                         AllOf(HasSubstr("connecting to rank 0"), HasSubstr("refused"))));
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    refused.Stamp();
  }));
}

// Rank 1 has dialled rank 0, which closes its mesh without ever accepting: the connection waiting
// in the listen backlog still hears the goodbye.
TEST(SocketMeshConnect, ConnectionInTheBacklogHearsTheGoodbye) {
  SharedTime dialing, failed;
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    if (rank == 0) {
      // Rank 1's connection waits in the backlog (its dial takes far less than 300 ms).
      ASSERT_TRUE(dialing.Await().has_value());
      usleep(300000);
      mesh.reset();
      EXPECT_TRUE(failed.Await().has_value());  // alive until rank 1 has heard the goodbye
      return;
    }
    dialing.Stamp();
    EXPECT_THAT(ExchangeWords(*mesh, 1, {0}, 1),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("peer 0: rank 0 closed its communicator")));
    failed.Stamp();
  }));
}

// Departures runs on another thread (as the Gloo peer watch does) while Exchanges connect peers.
TEST(SocketMeshConnect, DeparturesWhileExchangesConnect) {
  constexpr int kWorld = 6;
  SHARDKIT_EXPECT_OK(ForkRanks(kWorld, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, kWorld);
    ASSERT_NE(mesh, nullptr);
    std::vector<int> everyone;
    for (int peer = 0; peer < kWorld; ++peer) everyone.push_back(peer);
    std::atomic<bool> done = false;
    std::thread watch([&] {
      while (!done.load()) {
        // Ranks that finished early say goodbye; nothing else may be seen.
        EXPECT_THAT(mesh->Departures(everyone, absl::Milliseconds(1)),
                    Each(Field(&SocketMesh::Departure::how, How::kGoodbye)));
        EXPECT_LE(mesh->connections(), kWorld - 1);
      }
    });
    // Bruck-like rounds: partners at distance 1, 2, 4, ... each way.
    for (int distance = 1; distance < kWorld; distance *= 2) {
      std::vector<int> partners = {(rank + distance) % kWorld, (rank - distance + kWorld) % kWorld};
      if (partners[0] == partners[1]) partners.pop_back();
      EXPECT_TRUE(ExchangeWords(*mesh, rank, partners, distance).ok());
    }
    done.store(true);
    watch.join();
  }));
}

}  // namespace
}  // namespace shardkit
