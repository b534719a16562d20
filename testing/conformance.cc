#include "testing/conformance.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/comm/agreement_tree.h"
#include "core/comm/communicator.h"
#include "core/comm/connect.h"
#include "core/tensor/allocator.h"
#include "gmock/gmock.h"
#include "testing/conformance_cases.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit::testing {
namespace {

using conformance_internal::AllToAllSegmentsCase;
using conformance_internal::Bytes;
using conformance_internal::CaseArg;
using conformance_internal::Count;
using conformance_internal::Decode;
using conformance_internal::GatheredSegmentsCase;
using conformance_internal::Pattern;
using conformance_internal::PreparedTransferCase;
using conformance_internal::ScatterSegmentsCase;
using ::testing::HasSubstr;

void BroadcastCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  comm.ResetCounters();
  Bytes v(rank == a.root ? Pattern(a.root, 0, a.bytes) : std::vector<uint8_t>(a.bytes, 0xEE),
          a.device);
  SHARDKIT_ASSERT_OK(comm.Broadcast(v.buffer(), a.root));
  EXPECT_EQ(v.Read(), Pattern(a.root, 0, a.bytes));
  const OpCounters c = comm.counters(CollectiveOp::kBroadcast);
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(c.bytes_sent, rank == a.root ? a.bytes * (comm.world_size() - 1) : 0);
  EXPECT_EQ(c.bytes_received, rank == a.root ? 0 : a.bytes);
}

void ScatterCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  comm.ResetCounters();
  std::vector<Bytes> chunks;
  std::vector<ConstBuffer> sends;
  int64_t expected_sent = 0;
  if (rank == a.root) {
    for (int r = 0; r < n; ++r) {
      chunks.emplace_back(Pattern(a.root, r, Count(a.bytes, a.root, r)), a.device);
    }
    for (int r = 0; r < n; ++r) sends.push_back(chunks[r].buffer());
    for (int r = 0; r < n; ++r) expected_sent += r == a.root ? 0 : chunks[r].size();
  }
  Bytes recv(Count(a.bytes, a.root, rank), 0xEE, a.device);
  SHARDKIT_ASSERT_OK(comm.Scatter(sends, recv.buffer(), a.root));
  EXPECT_EQ(recv.Read(), Pattern(a.root, rank, recv.size()));
  const OpCounters c = comm.counters(CollectiveOp::kScatter);
  EXPECT_EQ(c.bytes_sent, expected_sent);
  EXPECT_EQ(c.bytes_received, rank == a.root ? 0 : static_cast<int64_t>(recv.size()));
}

void GatherCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  comm.ResetCounters();
  Bytes send(Pattern(rank, a.root, Count(a.bytes, rank, a.root)), a.device);
  std::vector<Bytes> slots;
  std::vector<MutableBuffer> recvs;
  if (rank == a.root) {
    for (int r = 0; r < n; ++r) slots.emplace_back(Count(a.bytes, r, a.root), 0xEE, a.device);
    for (int r = 0; r < n; ++r) recvs.push_back(slots[r].buffer());
  }
  SHARDKIT_ASSERT_OK(comm.Gather(send.buffer(), recvs, a.root));
  int64_t received = 0;
  for (int r = 0; r < static_cast<int>(slots.size()); ++r) {
    EXPECT_EQ(slots[r].Read(), Pattern(r, a.root, slots[r].size())) << "from rank " << r;
    received += r == a.root ? 0 : slots[r].size();
  }
  const OpCounters c = comm.counters(CollectiveOp::kGather);
  EXPECT_EQ(c.bytes_received, received);
  EXPECT_EQ(c.bytes_sent, rank == a.root ? 0 : static_cast<int64_t>(send.size()));
}

// What `rank` sends in one agreement that passes, over the binomial tree of
// core/comm/agreement_tree.h: its subtree's 128-byte headers up to its parent, and rank 0's
// 64-byte verdict down to each child (nothing else goes down when the ranks agree).
int64_t TreeControlBytesSent(int rank, int n) {
  const int64_t up = rank == 0 ? 0 : 128 * (SubtreeEnd(rank, n) - rank);
  return up + 64 * static_cast<int64_t>(TreeChildren(rank, n).size());
}

// What it receives: its children's subtrees' headers, and the verdict from its parent.
int64_t TreeControlBytesReceived(int rank, int n) {
  return 128 * (SubtreeEnd(rank, n) - rank - 1) + (rank == 0 ? 0 : 64);
}

void AllGatherCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  Bytes mine(Pattern(rank, 0, Count(a.bytes, rank, 0)), a.device);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<std::string> all, comm.AllGather(mine.buffer()));
  ASSERT_EQ(all.size(), static_cast<size_t>(comm.world_size()));
  for (int r = 0; r < comm.world_size(); ++r) {
    const std::vector<uint8_t> expected = Pattern(r, 0, Count(a.bytes, r, 0));
    EXPECT_EQ(std::vector<uint8_t>(all[r].begin(), all[r].end()), expected) << "from rank " << r;
  }
  // The same small input on every rank: rank 0's verdict carries it, and no header goes down.
  const std::string same = "the same on every rank";
  comm.ResetCounters();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(all, comm.AllGather(ConstBuffer(same)));
  EXPECT_EQ(all, std::vector<std::string>(comm.world_size(), same));
  const OpCounters c = comm.counters(CollectiveOp::kAllGather);
  EXPECT_EQ(c.control_bytes_sent, TreeControlBytesSent(rank, comm.world_size()));
  EXPECT_EQ(c.control_bytes_received, TreeControlBytesReceived(rank, comm.world_size()));
}

void AllToAllCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  comm.ResetCounters();
  std::vector<Bytes> out, in;
  std::vector<ConstBuffer> sends;
  std::vector<MutableBuffer> recvs;
  int64_t sent = 0, received = 0;
  for (int r = 0; r < n; ++r) {
    out.emplace_back(Pattern(rank, r, Count(a.bytes, rank, r)), a.device);
    in.emplace_back(Count(a.bytes, r, rank), 0xEE, a.device);
    sent += r == rank ? 0 : out[r].size();
    received += r == rank ? 0 : in[r].size();
  }
  for (int r = 0; r < n; ++r) sends.push_back(out[r].buffer());
  for (int r = 0; r < n; ++r) recvs.push_back(in[r].buffer());
  SHARDKIT_ASSERT_OK(comm.AllToAll(sends, recvs));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(in[r].Read(), Pattern(r, rank, in[r].size())) << "from " << r;
  }
  const OpCounters c = comm.counters(CollectiveOp::kAllToAll);
  EXPECT_EQ(c.bytes_sent, sent);
  EXPECT_EQ(c.bytes_received, received);
}

void BarrierCase(int rank, Communicator& comm, std::string_view arg) {
  comm.ResetCounters();
  SHARDKIT_ASSERT_OK(comm.Barrier());
  const OpCounters c = comm.counters(CollectiveOp::kBarrier);
  EXPECT_EQ(c.bytes_sent + c.bytes_received, 0);
  EXPECT_EQ(c.control_bytes_sent, TreeControlBytesSent(rank, comm.world_size()));
  EXPECT_EQ(c.control_bytes_received, TreeControlBytesReceived(rank, comm.world_size()));
}

void SplitCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  // Members: every rank with the root's parity, in reverse order (so new ranks differ).
  std::vector<int> members;
  for (int r = comm.world_size() - 1; r >= 0; --r) {
    if (r % 2 == a.root % 2) members.push_back(r);
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Communicator> sub, comm.Split(members));
  auto it = std::find(members.begin(), members.end(), rank);
  if (it == members.end()) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->rank(), it - members.begin());
  EXPECT_EQ(sub->world_size(), static_cast<int>(members.size()));
  const int sub_root = sub->world_size() - 1;
  Bytes v(sub->rank() == sub_root ? Pattern(9, 0, a.bytes) : std::vector<uint8_t>(a.bytes, 0),
          a.device);
  SHARDKIT_ASSERT_OK(sub->Broadcast(v.buffer(), sub_root));
  EXPECT_EQ(v.Read(), Pattern(9, 0, a.bytes));
}

// The root sends one byte more to the last rank than that rank expects: every rank must get the
// same kInvalidArgument, and the communicator must stay usable.
void MismatchedCountsCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  const int victim = a.root == n - 1 ? 0 : n - 1;
  std::vector<Bytes> chunks;
  std::vector<ConstBuffer> sends;
  if (rank == a.root) {
    for (int r = 0; r < n; ++r) chunks.emplace_back(a.bytes + (r == victim ? 1 : 0), 0, a.device);
    for (int r = 0; r < n; ++r) sends.push_back(chunks[r].buffer());
  }
  Bytes recv(a.bytes, 0, a.device);
  EXPECT_THAT(
      comm.Scatter(sends, recv.buffer(), a.root),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(absl::StrCat("byte counts disagree: rank ", a.root, " sends ", a.bytes + 1,
                                      " bytes to rank ", victim, ", which expects ", a.bytes))));
  SHARDKIT_EXPECT_OK(comm.Barrier());
}

// The root calls Broadcast while every other rank calls Barrier.
void MismatchedOpsCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  Bytes v(a.bytes, 0, a.device);
  const absl::Status status = rank == a.root ? comm.Broadcast(v.buffer(), a.root) : comm.Barrier();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("ranks called different operations")));
  SHARDKIT_EXPECT_OK(comm.Barrier());
}

// This process's rank of an externally launched job, connected on first use and kept for every
// later case (never destroyed: the job's ranks leave together at exit).
absl::StatusOr<Communicator*> ExternalRank(const std::string& backend) {
  static auto* comms = new std::map<std::string, absl::StatusOr<std::unique_ptr<Communicator>>>();
  auto it = comms->find(backend);
  if (it == comms->end()) {
    absl::StatusOr<ConnectOptions> options = ConnectOptionsFromEnv();
    if (options.ok()) options->backend = backend;
    it = comms->emplace(backend, options.ok() ? Connect(*options) : options.status()).first;
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

void RunExternalCase(RankGroup::CaseFn fn, const ConformanceParam& p, std::string_view arg) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Communicator * comm, ExternalRank(p.backend));
  if (comm->world_size() != p.world_size) {
    GTEST_SKIP() << "a case for " << p.world_size << " ranks; this job has " << comm->world_size();
  }
  SHARDKIT_ASSERT_OK(comm->poisoned()) << "an earlier case broke this rank's communicator";
  fn(comm->rank(), *comm, arg);
}

void RunCase(RankGroup::CaseFn fn) {
  const ConformanceParam& p = CommunicatorConformanceTest::GetParam();
  const CaseArg arg{p.bytes, p.root, p.device};
  const std::string_view packed(reinterpret_cast<const char*>(&arg), sizeof(arg));
  if (p.external) {
    RunExternalCase(fn, p, packed);
    return;
  }
  if (p.device_count != nullptr && p.device_count() < p.world_size) {
    GTEST_SKIP() << p.world_size << " ranks need " << p.world_size << " " << p.device.ToString()
                 << " devices; this machine has " << p.device_count();
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(p.world_size, p.backend));
  SHARDKIT_EXPECT_OK(group->Run(fn, packed));
}

TEST_P(CommunicatorConformanceTest, Broadcast) { RunCase(&BroadcastCase); }
TEST_P(CommunicatorConformanceTest, Scatter) { RunCase(&ScatterCase); }
TEST_P(CommunicatorConformanceTest, ScatterSegments) { RunCase(&ScatterSegmentsCase); }
TEST_P(CommunicatorConformanceTest, Gather) { RunCase(&GatherCase); }
TEST_P(CommunicatorConformanceTest, AllGather) { RunCase(&AllGatherCase); }
TEST_P(CommunicatorConformanceTest, AllToAll) { RunCase(&AllToAllCase); }
TEST_P(CommunicatorConformanceTest, AllToAllSegments) { RunCase(&AllToAllSegmentsCase); }
TEST_P(CommunicatorConformanceTest, GatheredSegments) { RunCase(&GatheredSegmentsCase); }
TEST_P(CommunicatorConformanceTest, PreparedTransfer) { RunCase(&PreparedTransferCase); }
TEST_P(CommunicatorConformanceTest, Barrier) { RunCase(&BarrierCase); }
TEST_P(CommunicatorConformanceTest, Split) { RunCase(&SplitCase); }

TEST_P(CommunicatorConformanceTest, MismatchedCountsFailOnEveryRank) {
  if (GetParam().world_size < 2) GTEST_SKIP() << "needs two ranks";
  RunCase(&MismatchedCountsCase);
}

TEST_P(CommunicatorConformanceTest, MismatchedOpsFailOnEveryRank) {
  if (GetParam().world_size < 2) GTEST_SKIP() << "needs two ranks";
  RunCase(&MismatchedOpsCase);
}

}  // namespace

std::vector<ConformanceParam> ConformanceParams(const std::string& backend, const Device& device) {
  std::vector<ConformanceParam> params;
  for (int n : {1, 2, 3, 4, 7}) {
    const std::set<int64_t> sizes = {0, 1, n - 1, 100003};
    const std::set<int> roots = {0, n - 1};
    for (int64_t bytes : sizes) {
      for (int root : roots) params.push_back({backend, n, bytes, root, device});
    }
  }
  return params;
}

std::vector<ConformanceParam> ExternalConformanceParams(const std::string& backend) {
  std::vector<ConformanceParam> params = ConformanceParams(backend);
  for (ConformanceParam& p : params) p.external = true;
  return params;
}

std::string ConformanceParamName(const ::testing::TestParamInfo<ConformanceParam>& info) {
  const ConformanceParam& p = info.param;
  return absl::StrCat("w", p.world_size, "_b", p.bytes, "_root", p.root);
}

}  // namespace shardkit::testing
