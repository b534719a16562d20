// SocketMesh over real forked processes and real TCP on 127.0.0.1: delivery in order, large
// messages that need several writes, a peer that leaves, a silent peer, a stray connection and
// Close. Each case connects its peers first, as Connect did before connections were made on demand
// (connect_test.cc has those).
#include "backends/socket_mesh/socket_mesh.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "backends/socket_mesh/socket_mesh_test_util.h"
#include "core/os/socket.h"
#include "core/store/store_url.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/faults.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::socket_mesh_testing::ConnectFullMesh;
using ::shardkit::socket_mesh_testing::ConnectMesh;
using ::shardkit::socket_mesh_testing::Loopback;
using ::shardkit::socket_mesh_testing::Word;
using ::shardkit::testing::ForkRanks;
using ::shardkit::testing::RankOptions;
using ::shardkit::testing::SharedTime;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;

// The byte rank `from` sends rank `to` at position i of message m.
uint8_t Pattern(int from, int to, int m, size_t i) {
  return static_cast<uint8_t>(from * 31 + to * 7 + m * 3 + i * 13);
}

TEST(SocketMesh, AllToAllInOrderWithLargeMessages) {
  constexpr int kWorld = 4;
  // Two messages per pair and direction: a small one, then one larger than any socket buffer.
  const std::vector<size_t> sizes = {128, 8 << 20};
  SHARDKIT_EXPECT_OK(ForkRanks(kWorld, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, kWorld);
    ASSERT_NE(mesh, nullptr);
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<SocketMesh::Send> sends;
    std::vector<SocketMesh::Recv> recvs;
    out.reserve(2 * kWorld);
    in.reserve(2 * kWorld);
    for (int peer = 0; peer < kWorld; ++peer) {
      if (peer == rank) continue;
      for (int m = 0; m < 2; ++m) {
        std::vector<uint8_t>& o = out.emplace_back(sizes[m]);
        for (size_t i = 0; i < o.size(); ++i) o[i] = Pattern(rank, peer, m, i);
        sends.push_back({peer, o.data(), o.size()});
        std::vector<uint8_t>& r = in.emplace_back(sizes[m]);
        recvs.push_back({peer, r.data(), r.size()});
      }
    }
    for (int round = 0; round < 3; ++round) {
      SHARDKIT_ASSERT_OK(mesh->Exchange(sends, recvs, absl::Now() + absl::Seconds(10)));
      for (size_t k = 0; k < recvs.size(); ++k) {
        const int m = static_cast<int>(k % 2);
        for (size_t i = 0; i < in[k].size(); i += 4093) {
          ASSERT_EQ(in[k][i], Pattern(recvs[k].peer, rank, m, i))
              << "round " << round << " from rank " << recvs[k].peer << " message " << m;
        }
        std::fill(in[k].begin(), in[k].end(), 0);
      }
    }
  }));
}

// Messages gathered from runs and scattered into runs, larger than a socket buffer and of more
// runs than one sendmsg takes: every byte lands where it belongs, both ways at once.
TEST(SocketMesh, GathersAndScattersRuns) {
  constexpr size_t kBytes = 6 << 20, kSendRun = 1000, kRecvRun = 777;
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    const int peer = 1 - rank;
    std::vector<uint8_t> spread(2 * kBytes), in(kBytes + kBytes / kRecvRun + 1, 0xEE);
    std::vector<iovec> send_runs, recv_runs;
    for (size_t at = 0; at < kBytes; at += kSendRun) {
      const size_t size = std::min(kSendRun, kBytes - at);
      for (size_t i = 0; i < size; ++i) spread[2 * at + i] = Pattern(rank, peer, 0, at + i);
      send_runs.push_back({spread.data() + 2 * at, size});
    }
    // Received with a byte left out after every run: the scatter is seen, not only the stream.
    for (size_t at = 0; at < kBytes; at += kRecvRun) {
      recv_runs.push_back({in.data() + at + at / kRecvRun, std::min(kRecvRun, kBytes - at)});
    }
    const SocketMesh::Send send{peer, spread.data(), kBytes, send_runs};
    const SocketMesh::Recv recv{peer, in.data(), kBytes, recv_runs};
    SHARDKIT_ASSERT_OK(mesh->Exchange({&send, 1}, {&recv, 1}, absl::Now() + absl::Seconds(10)));
    for (size_t i = 0; i < kBytes; ++i) {
      ASSERT_EQ(in[i + i / kRecvRun], Pattern(peer, rank, 0, i)) << "byte " << i;
      if (i % kRecvRun == kRecvRun - 1) {
        ASSERT_EQ(in[i + i / kRecvRun + 1], 0xEE) << "after byte " << i;
      }
    }
    // Runs that do not add up to the message's size are refused, and so is a first run under
    // kMinMessage bytes (a parting marker is looked for there).
    const SocketMesh::Send uneven{peer, spread.data(), kBytes + 1, send_runs};
    EXPECT_THAT(mesh->Exchange({&uneven, 1}, {}, absl::Now() + absl::Seconds(10)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("gathered from runs of ", kBytes, " bytes"))));
    const std::vector<iovec> short_first = {{spread.data(), 8}, {spread.data() + 8, 8}};
    const SocketMesh::Send bad{peer, spread.data(), 16, short_first};
    EXPECT_THAT(
        mesh->Exchange({&bad, 1}, {}, absl::Now() + absl::Seconds(10)),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whose first run has 8 bytes")));
  }));
}
TEST(SocketMesh, PeerThatLeavesFailsOthersAtOnce) {
  SHARDKIT_EXPECT_OK(ForkRanks(3, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectFullMesh(url, rank, 3);
    ASSERT_NE(mesh, nullptr);
    if (rank == 2) {
      mesh.reset();  // closes its mesh: a goodbye marker, then the end of the stream
      return;
    }
    // Seen as a clean departure (goodbye) before anything reads the stream.
    EXPECT_THAT(
        mesh->Departures(std::vector<int>{2}, absl::Seconds(10)),
        ElementsAre(Field(&SocketMesh::Departure::how, SocketMesh::Departure::How::kGoodbye)));
    Word word{};
    std::vector<SocketMesh::Recv> recvs = {{2, &word, sizeof(word)}};
    const absl::Time start = absl::Now();
    const absl::Status status = mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(20));
    EXPECT_THAT(status,
                StatusIs(absl::StatusCode::kUnavailable,
                         AllOf(HasSubstr("peer 2: rank 2 closed its communicator"),
                               HasSubstr("not heard from rank 2 (received 0 of 16 bytes"))));
    EXPECT_THAT(status.message(), Not(HasSubstr("went away")));
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "must not wait for the deadline";
  }));
}

// A killed rank says no goodbye: Departures tells it from a clean close, without waiting long.
TEST(SocketMesh, KilledPeerIsADepartureWithoutGoodbye) {
  RankOptions options;
  options.may_die = {1};
  SHARDKIT_EXPECT_OK(ForkRanks(
      2,
      [&](int rank, const std::string& url) {
        std::unique_ptr<SocketMesh> mesh = ConnectFullMesh(url, rank, 2);
        ASSERT_NE(mesh, nullptr);
        if (rank == 1) raise(SIGKILL);
        const absl::Time start = absl::Now();
        std::vector<SocketMesh::Departure> departed =
            mesh->Departures(std::vector<int>{1}, absl::Seconds(10));
        EXPECT_LT(absl::Now() - start, absl::Seconds(5));
        ASSERT_EQ(departed.size(), 1u);
        EXPECT_EQ(departed[0].peer, 1);
        EXPECT_EQ(departed[0].how, SocketMesh::Departure::How::kVanished);
      },
      options));
}

TEST(SocketMesh, SilentPeerTimesOutNamingIt) {
  SharedTime timed_out;
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectFullMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    Word word{7, 7};
    if (rank == 1) {
      timed_out.Await();  // alive, connected, silent past rank 0's deadline
      return;
    }
    std::vector<SocketMesh::Send> sends = {{1, &word, sizeof(word)}};
    std::vector<SocketMesh::Recv> recvs = {{1, &word, sizeof(word)}};
    const absl::Time start = absl::Now();
    EXPECT_THAT(mesh->Exchange(sends, recvs, start + absl::Milliseconds(300)),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr("peer 1: timed out"),
                               HasSubstr("not heard from rank 1 (received 0 of 16 bytes, sent 16 "
                                         "of 16 bytes)"))));
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
    // At the deadline, not later (rank 1 stays until then); room for a slow machine.
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    timed_out.Stamp();
  }));
}

// A client that is not a rank (wrong token) connects first; the mesh drops it and still forms.
TEST(SocketMesh, StrayConnectionIsDropped) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    int stray = -1;
    if (rank == 1) {
      absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(url);
      SHARDKIT_ASSERT_OK(store.status());
      absl::StatusOr<std::string> published = (*store)->Get("test/mesh/0", absl::Seconds(10));
      SHARDKIT_ASSERT_OK(published.status());
      std::vector<std::string> parts = absl::StrSplit(*published, ' ');
      ASSERT_EQ(parts.size(), 3u);
      absl::StatusOr<os::Fd> fd =
          os::ConnectTcp(parts[0], std::stoi(parts[1]), absl::Now() + absl::Seconds(5));
      SHARDKIT_ASSERT_OK(fd.status());
      stray = fd->release();
      const char junk[16] = "not a hello";
      SHARDKIT_ASSERT_OK(os::SendAll(stray, junk, sizeof(junk), absl::Now() + absl::Seconds(5)));
    }
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    Word mine{100u + rank, 0}, theirs{};
    std::vector<SocketMesh::Send> sends = {{1 - rank, &mine, sizeof(mine)}};
    std::vector<SocketMesh::Recv> recvs = {{1 - rank, &theirs, sizeof(theirs)}};
    SHARDKIT_ASSERT_OK(mesh->Exchange(sends, recvs, absl::Now() + absl::Seconds(10)));
    EXPECT_EQ(theirs[0], 101u - rank);
    if (stray >= 0) close(stray);
  }));
}

TEST(SocketMesh, CloseFailsBlockedPeersAtOnce) {
  SharedTime closed, heard;
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    if (rank == 0) {
      usleep(100000);
      closed.Stamp();
      mesh->Close();
      heard.Await();  // still alive: the peer must learn from the shutdown, not from an exit
      return;
    }
    Word word{};
    std::vector<SocketMesh::Recv> recvs = {{0, &word, sizeof(word)}};
    const absl::Time start = absl::Now();
    EXPECT_THAT(mesh->Exchange({}, recvs, start + absl::Seconds(20)),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("peer 0: rank 0 gave up on operation 0")));
    // Timed from the Close: the ranks start apart under load. Rank 0 lives until this is heard.
    ASSERT_TRUE(closed.Get().has_value());
    EXPECT_LT(absl::Now() - *closed.Get(), absl::Seconds(1));
    heard.Stamp();
  }));
}

// Rank 0 sends its message, gives up waiting for rank 1's and closes. Rank 1, arriving later,
// must fail too, not complete the exchange with the message rank 0 sent before giving up.
TEST(SocketMesh, MessageFromARankThatGaveUpDoesNotCompleteAnExchange) {
  SharedTime closed;
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectFullMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    Word mine{1, 1}, theirs{};
    std::vector<SocketMesh::Send> sends = {{1 - rank, &mine, sizeof(mine)}};
    std::vector<SocketMesh::Recv> recvs = {{1 - rank, &theirs, sizeof(theirs)}};
    if (rank == 0) {
      EXPECT_THAT(mesh->Exchange(sends, recvs, absl::Now() + absl::Milliseconds(200), /*call=*/5),
                  StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("timed out")));
      mesh->Close();
      closed.Stamp();
      EXPECT_THAT(mesh->Exchange(sends, recvs, absl::Now() + absl::Seconds(1), 6),
                  StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
      return;
    }
    ASSERT_TRUE(closed.Await().has_value()) << "rank 0 never closed";
    // Receiving only: rank 0's message is readable, the marker after it must fail this call.
    EXPECT_THAT(mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(5), /*call=*/5),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("peer 0: rank 0 gave up on operation 5")));
    // Sending too: the reset alone fails it.
    EXPECT_THAT(mesh->Exchange(sends, recvs, absl::Now() + absl::Seconds(5)),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("peer 0: rank 0 ")));
  }));
}

// Rank 0 finishes call 1 (it only sends), then gives up on call 2. Rank 1, late for call 1,
// still completes it: the marker names call 2. Its call 2 fails.
TEST(SocketMesh, GivingUpOnALaterCallDoesNotFailAnEarlierOne) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    Word word{42, 43};
    std::vector<SocketMesh::Send> sends = {{1, &word, sizeof(word)}};
    std::vector<SocketMesh::Recv> recvs = {{1 - rank, &word, sizeof(word)}};
    if (rank == 0) {
      SHARDKIT_EXPECT_OK(mesh->Exchange(sends, {}, absl::Now() + absl::Seconds(5), /*call=*/1));
      EXPECT_THAT(mesh->Exchange({}, recvs, absl::Now() + absl::Milliseconds(100), /*call=*/2),
                  StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("timed out")));
      mesh->Close();
      return;
    }
    usleep(500000);
    word = {};
    SHARDKIT_EXPECT_OK(mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(5), /*call=*/1));
    EXPECT_EQ(word, (Word{42, 43}));
    EXPECT_THAT(
        mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(5), /*call=*/2),
        StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 0 gave up on operation 2")));
  }));
}

// Rank 0 gives up with a message half written (rank 1 is not reading): it must not append its
// marker (whose bytes would complete the message), only reset. Rank 1 then fails, it does not
// complete the message with foreign bytes.
TEST(SocketMesh, HalfWrittenMessageIsNeverCompleted) {
  constexpr size_t kBig = 32 << 20;  // more than both socket buffers hold
  SharedTime closed;
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectFullMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    std::vector<char> big(kBig, 'x');
    if (rank == 0) {
      std::vector<SocketMesh::Send> sends = {{1, big.data(), big.size()}};
      EXPECT_THAT(mesh->Exchange(sends, {}, absl::Now() + absl::Milliseconds(200), /*call=*/1),
                  StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("sends to rank 1")));
      mesh->Close();
      closed.Stamp();
      return;
    }
    ASSERT_TRUE(closed.Await().has_value()) << "rank 0 never closed";
    std::vector<SocketMesh::Recv> recvs = {{0, big.data(), big.size()}};
    EXPECT_THAT(
        mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(5), /*call=*/1),
        StatusIs(absl::StatusCode::kUnavailable, AllOf(HasSubstr("rank 0 reset its connection"),
                                                       HasSubstr("not heard from rank 0"))));
  }));
}

TEST(SocketMesh, MessagesShorterThanAMarkerAreRefused) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    uint64_t small = 0;
    std::vector<SocketMesh::Send> sends = {{1 - rank, &small, sizeof(small)}};
    EXPECT_THAT(mesh->Exchange(sends, {}, absl::Now() + absl::Seconds(1)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("a 8-byte message (the minimum is 16)")));
  }));
}

}  // namespace
}  // namespace shardkit
