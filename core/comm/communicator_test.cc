// What the core hands to a backend, seen through a one-process stand-in (not a backend: the Gloo
// and NCCL conformance suites prove those). Every call's exchanges carry its sequence number,
// RawExchange carries the last call's, and each gets the deadline its CallOptions resolve to.
#include "core/comm/communicator.h"

#include <cstring>
#include <vector>

#include "absl/time/clock.h"
#include "core/comm/internal/call_agreement.h"
#include "core/comm/prepared_transfer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::FieldsAre;
using ::testing::HasSubstr;

// Rank 1 of a world of two whose peer is a mirror: rank 0 answers the agreement header as if its
// own were the same (rank 1 is a leaf of the agreement's tree: it sends its header to rank 0 and
// receives rank 0's verdict in one exchange), and every payload sent to rank 0 comes back as
// rank 0's message of the same size.
class MirrorCommunicator : public Communicator {
 public:
  struct Seen {
    bool control;
    uint64_t tag;
    uint64_t seq;
    absl::Time deadline;
  };

  MirrorCommunicator() : Communicator({.rank = 1, .world_size = 2, .backend = "mirror"}) {}

  bool SupportsDevice(const Device& device) const override { return device.is_cpu(); }
  const std::vector<Seen>& seen() const { return seen_; }

 protected:
  absl::Status Exchange(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs, absl::Time deadline) override {
    seen_.push_back({false, tag, seq, deadline});
    return Mirror(sends, recvs);
  }
  absl::Status ExchangeControl(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                               std::span<const RecvOp> recvs, absl::Time deadline) override {
    seen_.push_back({true, tag, seq, deadline});
    if (sends.size() == 1 && sends[0].size == sizeof(internal::ControlHeader) &&
        recvs.size() == 1 && recvs[0].size == sizeof(internal::AgreementVerdict)) {
      internal::ControlHeader both[2];
      std::memcpy(&both[0], sends[0].data, sizeof(both[0]));
      both[1] = both[0];
      internal::Declaration d;
      d.op = static_cast<CollectiveOp>(both[0].op);
      const internal::AgreementVerdict verdict = internal::Judge(d, both);
      std::memcpy(recvs[0].data, &verdict, sizeof(verdict));
      return absl::OkStatus();
    }
    return Mirror(sends, recvs);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> CreateSubgroup(const std::vector<int>&, int,
                                                               uint64_t, absl::Time) override {
    return absl::UnimplementedError("mirror");
  }

 private:
  static absl::Status Mirror(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
    for (size_t i = 0; i < recvs.size(); ++i) {
      if (i >= sends.size() || sends[i].size != recvs[i].size) {
        return absl::InternalError("the mirror needs a send for every receive");
      }
      std::memcpy(recvs[i].data, sends[i].data, recvs[i].size);
    }
    return absl::OkStatus();
  }

  std::vector<Seen> seen_;
};

TEST(Communicator, BackendsGetTheCallsSequenceNumberWithOpaqueTags) {
  MirrorCommunicator comm;
  std::vector<uint8_t> data(64, 7);
  SHARDKIT_ASSERT_OK(comm.Barrier());                          // seq 1: agreement only
  SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(data), 1));  // seq 2: agreement, payload
  SHARDKIT_ASSERT_OK(comm.Barrier());                          // seq 3
  std::vector<ConstBuffer> sends = {ConstBuffer(data), ConstBuffer()};
  SHARDKIT_ASSERT_OK(internal::RawExchange(comm, sends, {}, {}));  // after call 3
  const std::vector<MirrorCommunicator::Seen>& seen = comm.seen();
  ASSERT_EQ(seen.size(), 5u);
  std::vector<std::pair<bool, uint64_t>> calls;
  for (const auto& s : seen) calls.push_back({s.control, s.seq});
  EXPECT_THAT(calls, ElementsAre(FieldsAre(true, 1), FieldsAre(true, 2), FieldsAre(false, 2),
                                 FieldsAre(true, 3), FieldsAre(false, 3)));
  // Payload tags differ from each other and from the agreement's fixed tags.
  EXPECT_NE(seen[2].tag, seen[4].tag);
  EXPECT_NE(seen[2].tag, seen[1].tag);
  EXPECT_NE(seen[4].tag, seen[3].tag);
}

TEST(Communicator, RawExchangeResolvesItsDeadlineLikeEveryCall) {
  MirrorCommunicator comm;
  std::vector<uint8_t> data(64, 7);
  std::vector<ConstBuffer> sends = {ConstBuffer(data), ConstBuffer()};
  CallOptions shared;
  shared.deadline = absl::Now() + absl::Milliseconds(1234);
  SHARDKIT_ASSERT_OK(internal::RawExchange(comm, sends, {}, shared));
  SHARDKIT_ASSERT_OK(comm.Barrier(shared));
  CallOptions quick;
  quick.timeout = absl::Seconds(2);
  const absl::Time before = absl::Now();
  SHARDKIT_ASSERT_OK(internal::RawExchange(comm, sends, {}, quick));
  const absl::Time after = absl::Now();
  const std::vector<MirrorCommunicator::Seen>& seen = comm.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].deadline, shared.deadline);  // the absolute deadline wins
  EXPECT_EQ(seen[1].deadline, shared.deadline);
  EXPECT_GE(seen[2].deadline, before + absl::Seconds(2));
  EXPECT_LE(seen[2].deadline, after + absl::Seconds(2));
}

// Rank 1's segments to and from its mirror: `bytes` each way, cut in two halves (the mirror
// answers each send with a receive of its size).
RoundShape MirrorRound(uint64_t bytes) {
  const std::vector<uint64_t> halves = {bytes / 2, bytes - bytes / 2};
  return {{halves, {}}, {halves, {}}};
}

// Both halves of `v`.
template <typename Buffer, typename T>
std::vector<std::vector<Buffer>> Halves(T& v) {
  return {
      {Buffer(v.data(), v.size() / 2), Buffer(v.data() + v.size() / 2, v.size() - v.size() / 2)},
      {}};
}

TEST(PreparedTransfer, RoundsArePayloadOnlyUnderTheirOwnTagsAndThePreparedDeadline) {
  MirrorCommunicator comm;
  std::vector<uint8_t> out(64, 7), in(64, 0);
  CallOptions options;
  options.deadline = absl::Now() + absl::Seconds(99);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      PreparedTransfer t, PreparedTransfer::Prepare(comm, {MirrorRound(64)}, 5, options));  // seq 1
  const auto sends = Halves<ConstBuffer>(out);
  const auto recvs = Halves<MutableBuffer>(in);
  SHARDKIT_ASSERT_OK(t.Run(0, sends, recvs));
  SHARDKIT_ASSERT_OK(comm.Barrier());  // seq 2
  SHARDKIT_ASSERT_OK(t.Run(0, sends, recvs));
  SHARDKIT_ASSERT_OK(t.Close());  // seq 3: two rounds ran
  EXPECT_EQ(in, out);
  std::vector<std::pair<bool, uint64_t>> calls;
  for (const auto& s : comm.seen()) calls.push_back({s.control, s.seq});
  // A round is one payload exchange, reported under the last call's sequence number.
  EXPECT_THAT(calls, ElementsAre(FieldsAre(true, 1), FieldsAre(false, 1), FieldsAre(true, 2),
                                 FieldsAre(false, 2), FieldsAre(true, 3)));
  EXPECT_NE(comm.seen()[1].tag, comm.seen()[3].tag);
  EXPECT_EQ(comm.seen()[1].deadline, options.deadline);
  EXPECT_EQ(comm.seen()[3].deadline, options.deadline);
  const OpCounters c = comm.counters(CollectiveOp::kAllToAllSegments);
  EXPECT_EQ(c.calls, 2);  // the preparation and the close
  EXPECT_EQ(c.bytes_sent, 128);
  EXPECT_EQ(c.bytes_received, 128);
}

TEST(PreparedTransfer, OneRoundNeedsNoClose) {
  MirrorCommunicator comm;
  std::vector<uint8_t> out(8, 3), in(8, 0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(PreparedTransfer t,
                                PreparedTransfer::Prepare(comm, {MirrorRound(8)}, 5));
  SHARDKIT_ASSERT_OK(t.Run(0, Halves<ConstBuffer>(out), Halves<MutableBuffer>(in)));
  SHARDKIT_ASSERT_OK(t.Close());
  EXPECT_EQ(comm.seen().size(), 2u);  // the agreement and the round
  EXPECT_EQ(in, out);
}

TEST(PreparedTransfer, BuffersOtherThanPreparedFailTheRoundAndPoison) {
  MirrorCommunicator comm;
  std::vector<uint8_t> out(64, 7), in(64, 0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(PreparedTransfer t,
                                PreparedTransfer::Prepare(comm, {MirrorRound(64)}, 5));
  const std::vector<std::vector<ConstBuffer>> whole = {{ConstBuffer(out)}, {}};
  EXPECT_THAT(t.Run(0, whole, Halves<MutableBuffer>(in)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("round 1 of 1 of the transfer prepared at seq 1: segments to rank "
                                 "0 are [64] bytes, prepared as [32, 32]")));
  EXPECT_THAT(comm.Barrier(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("must be recreated")));
  EXPECT_EQ(comm.seen().size(), 1u);  // nothing moved
}

}  // namespace
}  // namespace shardkit
