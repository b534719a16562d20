// Gave-up markers carry their cause (the rank whose vanishing made the sender give up): the
// marker's wire form, the words for departures, a cascade over real forked processes on
// 127.0.0.1 in which distant ranks still name the rank that was killed, and Close's own cause.
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/socket_mesh/internal/mesh_marker.h"
#include "backends/socket_mesh/socket_mesh.h"
#include "backends/socket_mesh/socket_mesh_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::internal::MeshMarker;
using ::shardkit::socket_mesh_testing::ConnectMesh;
using ::shardkit::socket_mesh_testing::ExchangeWords;
using ::shardkit::socket_mesh_testing::Word;
using ::shardkit::testing::ForkRanks;
using ::shardkit::testing::RankOptions;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::StrEq;
using How = SocketMesh::Departure::How;

constexpr char kWentAway[] = " went away without closing its communicator (killed or crashed?)";

std::optional<MeshMarker> RoundTrip(const MeshMarker& marker) {
  const std::string bytes = internal::EncodeMarker(marker);
  EXPECT_EQ(bytes.size(), internal::kMeshMarkerSize);
  return internal::ParseMarker(bytes.data(), bytes.size());
}

TEST(MeshMarker, RoundTripsWithAndWithoutCause) {
  for (const int cause : {-1, 0, 5, MeshMarker::kMaxCause}) {
    const std::optional<MeshMarker> parsed = RoundTrip({MeshMarker::kGaveUp, 7, cause});
    ASSERT_TRUE(parsed.has_value()) << cause;
    EXPECT_EQ(parsed->kind, MeshMarker::kGaveUp);
    EXPECT_EQ(parsed->call, 7u);
    EXPECT_EQ(parsed->cause, cause);
  }
  EXPECT_THAT(RoundTrip({MeshMarker::kGoodbye, 3}),
              Optional(AllOf(Field(&MeshMarker::kind, MeshMarker::kGoodbye),
                             Field(&MeshMarker::call, 3u), Field(&MeshMarker::cause, -1))));
  // Ranks beyond the 3 bytes travel as none known.
  EXPECT_THAT(RoundTrip({MeshMarker::kGaveUp, 7, MeshMarker::kMaxCause + 1}),
              Optional(Field(&MeshMarker::cause, -1)));
}

TEST(MeshMarker, OldMarkerWithZeroPadHasNoCause) {
  unsigned char bytes[internal::kMeshMarkerSize] = {0xff, 0xff, 'M', 'K', 'A', 0, 0, 0};
  const uint64_t call = 9;
  std::memcpy(bytes + 8, &call, sizeof(call));
  EXPECT_THAT(internal::ParseMarker(bytes, sizeof(bytes)),
              Optional(AllOf(Field(&MeshMarker::kind, MeshMarker::kGaveUp),
                             Field(&MeshMarker::call, 9u), Field(&MeshMarker::cause, -1))));
}

TEST(MeshMarker, DescriptionNamesTheCause) {
  EXPECT_EQ(internal::DescribeMarker(5, {MeshMarker::kGaveUp, 7, 3}),
            absl::StrCat("rank 5 gave up on operation 7 after rank 3", kWentAway));
  EXPECT_EQ(internal::DescribeMarker(5, {MeshMarker::kGaveUp, 7}),
            "rank 5 gave up on operation 7 (see its own error)");
}

TEST(MeshMarker, InterruptedRankTravelsAndIsWorded) {
  const int cause = 2 | MeshMarker::kInterruptedFlag;
  EXPECT_THAT(RoundTrip({MeshMarker::kGaveUp, 7, cause}),
              Optional(Field(&MeshMarker::cause, cause)));
  EXPECT_EQ(internal::CulpritOfCause(cause), (Culprit{2, Culprit::How::kInterrupted}));
  constexpr char kWhy[] = " (Ctrl-C, or its program called Communicator::Abort)";
  // The interrupted rank's own marker, and a marker of a rank that gave up because of it.
  EXPECT_EQ(internal::DescribeMarker(2, {MeshMarker::kGaveUp, 7, cause}),
            absl::StrCat("rank 2 was interrupted during operation 7", kWhy));
  EXPECT_EQ(internal::DescribeMarker(5, {MeshMarker::kGaveUp, 7, cause}),
            absl::StrCat("rank 5 gave up on operation 7 after rank 2 was interrupted", kWhy));
  EXPECT_EQ(SocketMesh::DescribeDeparture({2, How::kGaveUp, 7, cause}),
            absl::StrCat("rank 2 was interrupted", kWhy));
  EXPECT_EQ(SocketMesh::DescribeDeparture({5, How::kGaveUp, 7, cause}),
            absl::StrCat("rank 5 gave up after rank 2 was interrupted", kWhy));
}

// Interrupt wakes an Exchange blocked on another thread, and fails every later one at once.
TEST(SocketMeshCause, InterruptWakesAnExchange) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 2);
    ASSERT_NE(mesh, nullptr);
    SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, rank, {1 - rank}, 1));
    if (rank == 0) {
      usleep(1500000);  // sends nothing for call 2 meanwhile
      return;
    }
    std::thread interrupter([&] {
      usleep(200000);
      mesh->Interrupt();
    });
    const absl::Time start = absl::Now();
    Word word{};
    std::vector<SocketMesh::Recv> recvs = {{0, &word, sizeof(word)}};
    EXPECT_THAT(mesh->Exchange({}, recvs, start + absl::Seconds(20), /*call=*/2),
                StatusIs(absl::StatusCode::kCancelled, HasSubstr("interrupted")));
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    interrupter.join();
    EXPECT_THAT(mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(20), /*call=*/3),
                StatusIs(absl::StatusCode::kCancelled, HasSubstr("interrupted")));
  }));
}

TEST(SocketMeshCause, DescribeDepartureWordsEachKind) {
  EXPECT_EQ(SocketMesh::DescribeDeparture({5, How::kVanished}), absl::StrCat("rank 5", kWentAway));
  EXPECT_EQ(SocketMesh::DescribeDeparture({5, How::kGaveUp, 7, 3}),
            absl::StrCat("rank 5 gave up after rank 3", kWentAway));
  EXPECT_EQ(SocketMesh::DescribeDeparture({5, How::kGaveUp, 7}),
            "rank 5 gave up after an error of its own");
  EXPECT_EQ(SocketMesh::DescribeDeparture({5, How::kGoodbye, 7}),
            "rank 5 has closed its communicator");
}

// A chain of 5 ranks (rank r exchanges with r ± 1 only). Rank 0 is killed: only rank 1 sees it
// vanish; it gives up, which fails rank 2, and so on. Every rank still names rank 0.
TEST(SocketMeshCause, CascadeNamesTheRankThatWentAway) {
  constexpr int kWorld = 5;
  RankOptions options;
  options.may_die = {0};
  SHARDKIT_EXPECT_OK(ForkRanks(
      kWorld,
      [&](int rank, const std::string& url) {
        std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, kWorld);
        ASSERT_NE(mesh, nullptr);
        std::vector<int> neighbours;
        if (rank > 0) neighbours.push_back(rank - 1);
        if (rank < kWorld - 1) neighbours.push_back(rank + 1);
        SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, rank, neighbours, 1));
        if (rank == 0) raise(SIGKILL);
        absl::Status status;
        const absl::Time until = absl::Now() + absl::Seconds(20);
        for (uint64_t call = 2; status.ok() && absl::Now() < until; ++call) {
          status = ExchangeWords(*mesh, rank, neighbours, call);
        }
        ASSERT_FALSE(status.ok()) << "rank " << rank << " never failed";
        // The marker may have been read before the reset that follows it ends the stream.
        EXPECT_EQ(mesh->Departures(std::vector<int>{rank - 1}, absl::Seconds(10)).size(), 1u);
        const std::string departures = mesh->DescribeDepartures();
        // Another cause given to Close does not replace the one the mesh saw first.
        mesh->Close(/*cause=*/rank == 1 ? 3 : -1);
        if (rank == 1) {
          EXPECT_THAT(departures, HasSubstr(absl::StrCat("rank 0", kWentAway)));
          return;
        }
        const std::string gave_up = absl::StrCat("rank ", rank - 1, " gave up");
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                                     AllOf(HasSubstr(gave_up),
                                           HasSubstr(absl::StrCat("after rank 0", kWentAway)))));
        EXPECT_THAT(departures, StrEq(absl::StrCat(gave_up, " after rank 0", kWentAway)));
      },
      options));
}

// The peer watch saw a payload peer (here rank 2) vanish: Close's cause is what the markers say.
TEST(SocketMeshCause, CloseWithACauseSendsIt) {
  SHARDKIT_EXPECT_OK(ForkRanks(3, [&](int rank, const std::string& url) {
    std::unique_ptr<SocketMesh> mesh = ConnectMesh(url, rank, 3);
    ASSERT_NE(mesh, nullptr);
    if (rank == 2) return;  // never connected
    SHARDKIT_ASSERT_OK(ExchangeWords(*mesh, rank, {1 - rank}, 1));
    if (rank == 0) {
      usleep(200000);  // rank 1 has finished call 1
      mesh->Close(/*cause=*/2);
      usleep(500000);
      return;
    }
    const std::vector<SocketMesh::Departure> departed =
        mesh->Departures(std::vector<int>{0}, absl::Seconds(10));
    ASSERT_THAT(departed, ElementsAre(AllOf(Field(&SocketMesh::Departure::how, How::kGaveUp),
                                            Field(&SocketMesh::Departure::call, 1u),
                                            Field(&SocketMesh::Departure::cause, 2))));
    const std::string words = absl::StrCat("rank 0 gave up after rank 2", kWentAway);
    EXPECT_EQ(SocketMesh::DescribeDeparture(departed[0]), words);
    EXPECT_EQ(mesh->DescribeDepartures(), words);
    Word word{};
    std::vector<SocketMesh::Recv> recvs = {{0, &word, sizeof(word)}};
    EXPECT_THAT(mesh->Exchange({}, recvs, absl::Now() + absl::Seconds(5), /*call=*/2),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr(absl::StrCat(
                             "peer 0: rank 0 gave up on operation 1 after rank 2", kWentAway))));
  }));
}

}  // namespace
}  // namespace shardkit
