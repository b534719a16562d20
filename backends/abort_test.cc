// Communicator::Abort on the backends that can wake a blocked call (Gloo: :abort_gloo_test; UCX:
// :abort_ucx_test, $SHARDKIT_TEST_BACKEND), across real forked ranks: a call blocked in the
// agreement, in a payload wait and in its first exchange with a peer (Gloo: connecting the pair)
// fails at once with kCancelled on the rank aborted from another thread; the ranks waiting on it
// fail well before their deadline, naming it as interrupted; it refuses every later call; an
// abort with no call in flight fails the others' next call at once too.
#include <thread>
#include <vector>

#include "core/comm/communicator.h"
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
using ::shardkit::testing::TestBackend;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kInterrupted[] = "rank 1 was interrupted";
// The ranks' per-call deadline: every wait below must end long before it.
constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr absl::Duration kSoon = absl::Seconds(2);

RankOptions Options() {
  RankOptions options;
  options.timeout = kTimeout;
  options.deadline = absl::Seconds(25);
  return options;
}

// Runs `call` on this thread while another aborts `comm` after 300 ms; checks that the call
// failed with kCancelled within kSoon of the abort, and that the next call is refused.
void AbortedDuring(Communicator& comm, const std::function<absl::Status()>& call) {
  std::thread aborter([&comm] {
    absl::SleepFor(absl::Milliseconds(300));
    comm.Abort();
  });
  const absl::Time start = absl::Now();
  const absl::Status status = call();
  aborter.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("interrupted")));
  EXPECT_LT(absl::Now() - start, kSoon) << status;
  EXPECT_THAT(comm.Barrier(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("must be recreated")));
}

// Rank 1 waits for a broadcast that rank 0 starts only 4 s later: it is aborted in the
// agreement. Rank 2 waits in the same broadcast; rank 0, arriving, learns that rank 1 was
// interrupted (Gloo: its marker; UCX: its gave-up record).
TEST(Abort, WakesACallWaitingInTheAgreement) {
  SHARDKIT_EXPECT_OK(RunRanks(
      3, TestBackend(),
      [](int rank, Communicator& comm) {
        SHARDKIT_ASSERT_OK(comm.Barrier());
        std::vector<int> v(4, rank);
        if (rank == 1) {
          AbortedDuring(comm, [&] { return comm.Broadcast(MutableBuffer(v), 0); });
          return;
        }
        if (rank == 0) absl::SleepFor(absl::Seconds(4));
        const absl::Time start = absl::Now();
        absl::Status status = comm.Broadcast(MutableBuffer(v), 0);
        if (status.ok()) {
          // The root's own part may complete (UCX: rank 1's header had arrived, and the send to
          // it completes eagerly); a broadcast says nothing of the others'. Its next call fails.
          EXPECT_EQ(rank, 0) << "only the root's part can complete without rank 1";
          status = comm.Barrier();
        }
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr(kInterrupted)));
        EXPECT_LT(absl::Now() - start, absl::Seconds(rank == 0 ? 2 : 6))
            << "must not wait for the deadline";
      },
      Options()));
}

// Rank 1 waits to receive a payload (RawExchange: no agreement) that rank 0 never sends.
TEST(Abort, WakesACallWaitingForPayload) {
  SharedTime done;
  SHARDKIT_EXPECT_OK(RunRanks(
      2, TestBackend(),
      [&done](int rank, Communicator& comm) {
        std::vector<uint8_t> data(1 << 20);
        std::vector<MutableBuffer> recvs(2);
        std::vector<ConstBuffer> sends(2);
        if (rank == 0) sends[1] = ConstBuffer(data.data(), data.size());
        if (rank == 1) recvs[0] = MutableBuffer(data);
        SHARDKIT_ASSERT_OK(internal::RawExchange(comm, sends, recvs, {}));  // pairs connected
        if (rank == 0) {
          done.Await();  // sends nothing more
          return;
        }
        AbortedDuring(comm, [&] { return internal::RawExchange(comm, {}, recvs, {}); });
        done.Stamp();
      },
      Options()));
}

// Rank 1's first payload with rank 0, which never takes part (Gloo: waiting for the pair that
// rank 0 never connects).
TEST(Abort, WakesACallConnectingAPair) {
  SharedTime done;
  SHARDKIT_EXPECT_OK(RunRanks(
      2, TestBackend(),
      [&done](int rank, Communicator& comm) {
        if (rank == 0) {
          done.Await();
          return;
        }
        std::vector<uint8_t> data(1 << 10);
        std::vector<MutableBuffer> recvs(2);
        recvs[0] = MutableBuffer(data);
        AbortedDuring(comm, [&] { return internal::RawExchange(comm, {}, recvs, {}); });
        done.Stamp();
      },
      Options()));
}

// Rank 1 is aborted between calls: the others' next call fails at once, naming it.
TEST(Abort, WithNoCallInFlightFailsThePeersNextCall) {
  SHARDKIT_EXPECT_OK(RunRanks(
      3, TestBackend(),
      [](int rank, Communicator& comm) {
        SHARDKIT_ASSERT_OK(comm.Barrier());
        if (rank == 1) {
          comm.Abort();
          EXPECT_THAT(comm.Barrier(),
                      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(kInterrupted)));
          return;
        }
        absl::SleepFor(absl::Milliseconds(300));
        const absl::Time start = absl::Now();
        EXPECT_THAT(comm.Barrier(),
                    StatusIs(absl::StatusCode::kUnavailable, HasSubstr(kInterrupted)));
        EXPECT_LT(absl::Now() - start, kSoon) << "must not wait for the deadline";
      },
      Options()));
}

}  // namespace
}  // namespace shardkit
