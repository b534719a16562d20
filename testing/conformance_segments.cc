// The conformance suite's cases for the segment calls: ScatterSegments, AllToAllSegments, gathered
// sends and PreparedTransfer (testing/conformance.h runs them on every backend).
#include <array>

#include "absl/strings/str_cat.h"
#include "core/comm/prepared_transfer.h"
#include "testing/conformance_cases.h"

namespace shardkit::testing::conformance_internal {

using ::testing::HasSubstr;

// ScatterSegments: the root sends each rank its chunk cut into three segments (one may be empty)
// that the receiver posts as three buffers; the root's own chunk is cut differently from its
// receive buffers.
void ScatterSegmentsCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  comm.ResetCounters();
  auto cuts = [](size_t size) {  // three segments: [0, size/3), [size/3, size/3), [size/3, size)
    return std::array<size_t, 3>{size / 3, 0, size - size / 3};
  };
  std::vector<Bytes> chunks;
  std::vector<std::vector<ConstBuffer>> sends(rank == a.root ? n : 0);
  for (int r = 0; r < static_cast<int>(sends.size()); ++r) {
    chunks.emplace_back(Pattern(a.root, r, Count(a.bytes, a.root, r)), a.device);
  }
  for (int r = 0; r < static_cast<int>(sends.size()); ++r) {
    const MutableBuffer whole = chunks[r].buffer();
    if (r == a.root) {  // the root's own part in one piece
      sends[r].push_back(whole);
      continue;
    }
    size_t at = 0;
    for (size_t cut : cuts(whole.size)) {
      sends[r].push_back(ConstBuffer(static_cast<const uint8_t*>(whole.data) + at, cut, a.device));
      at += cut;
    }
  }
  Bytes recv(Count(a.bytes, a.root, rank), 0xEE, a.device);
  const MutableBuffer whole = recv.buffer();
  std::vector<MutableBuffer> recvs;
  size_t at = 0;
  for (size_t cut : cuts(whole.size)) {
    recvs.push_back(MutableBuffer(static_cast<uint8_t*>(whole.data) + at, cut, a.device));
    at += cut;
  }
  SHARDKIT_ASSERT_OK(comm.ScatterSegments(sends, recvs, a.root));
  EXPECT_EQ(recv.Read(), Pattern(a.root, rank, recv.size()));
  EXPECT_EQ(comm.counters(CollectiveOp::kScatter).bytes_received,
            rank == a.root ? 0 : static_cast<int64_t>(recv.size()));

  // The same bytes cut into other segments on one receiver: the same error on every rank.
  if (n < 2) return;
  const int victim = a.root == n - 1 ? 0 : n - 1;
  if (Count(a.bytes, a.root, victim) < 3) return;  // cut in two pieces; alike on every rank
  if (rank == victim) recvs = {MutableBuffer(whole.data, whole.size, a.device)};
  EXPECT_THAT(comm.ScatterSegments(sends, recvs, a.root),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("segment sizes disagree: rank ", a.root))));
  SHARDKIT_EXPECT_OK(comm.Barrier());
}

// Three segments per pair (the pattern cut at 1/3 and at the end: the last one empty), each
// reported by `arrived` once, each peer's in order, its bytes already in when it is.
void AllToAllSegmentsCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  auto cuts = [&](int from, int to) {
    const size_t size = Count(a.bytes, from, to);
    return std::vector<size_t>{size / 3, size - size / 3, 0};
  };
  std::vector<Bytes> out, in;
  std::vector<std::vector<ConstBuffer>> sends(n);
  std::vector<std::vector<MutableBuffer>> recvs(n);
  for (int r = 0; r < n; ++r) {
    out.emplace_back(Pattern(rank, r, Count(a.bytes, rank, r)), a.device);
    in.emplace_back(Count(a.bytes, r, rank), 0xEE, a.device);
  }
  for (int r = 0; r < n; ++r) {
    size_t at = 0;
    for (size_t size : cuts(rank, r)) {
      const MutableBuffer whole = out[r].buffer();
      sends[r].emplace_back(static_cast<const uint8_t*>(whole.data) + at, size, whole.device);
      at += size;
    }
    at = 0;
    for (size_t size : cuts(r, rank)) {
      const MutableBuffer whole = in[r].buffer();
      recvs[r].emplace_back(static_cast<uint8_t*>(whole.data) + at, size, whole.device);
      at += size;
    }
  }
  std::vector<size_t> next(n, 0);
  auto arrived = [&](int peer, size_t index) -> absl::Status {
    EXPECT_EQ(index, next[peer]++) << "from " << peer;
    size_t end = 0;
    for (size_t i = 0; i <= index; ++i) end += cuts(peer, rank)[i];
    const std::vector<uint8_t> expected = Pattern(peer, rank, in[peer].size());
    const std::vector<uint8_t>& got = in[peer].Read();
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + end, expected.begin()))
        << "segment " << index << " from " << peer << " reported before it arrived";
    return absl::OkStatus();
  };
  const Communicator::SegmentArrived report(arrived);
  comm.ResetCounters();
  SHARDKIT_ASSERT_OK(comm.AllToAllSegments(sends, recvs, /*check=*/7, {}, &report));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(next[r], 3u) << "segments from " << r << " reported";
    EXPECT_EQ(in[r].Read(), Pattern(r, rank, in[r].size())) << "from " << r;
  }
  // Counted as a kind of its own, not as an AllToAll.
  EXPECT_EQ(comm.counters(CollectiveOp::kAllToAllSegments).calls, 1);
  EXPECT_EQ(comm.counters(CollectiveOp::kAllToAll).calls, 0);
  // Ranks passing different check values fail alike, the call named for what it is.
  if (n == 1) return;
  EXPECT_THAT(comm.AllToAllSegments(sends, recvs, /*check=*/rank == 0 ? 7 : 8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ranks disagree on the AllToAllSegments check value")));
}

// Gathered sends (5-byte runs of a twice larger buffer, the bytes between them filler), then the
// same segments as a round of a prepared transfer: where the backend gathers both arrive intact
// and both are counted; elsewhere every rank is refused (the buffer named) and stays usable.
void GatheredSegmentsCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  comm.ResetCounters();
  std::vector<std::vector<uint8_t>> spread(n), in(n);
  std::vector<std::vector<HostRun>> runs(n);
  std::vector<std::vector<ConstBuffer>> sends(n);
  std::vector<std::vector<MutableBuffer>> recvs(n);
  int64_t sent = 0, received = 0;
  bool any_gathered = false;
  for (int r = 0; r < n; ++r) {
    const std::vector<uint8_t> pattern = Pattern(rank, r, Count(a.bytes, rank, r));
    spread[r].assign(2 * pattern.size(), 0xAB);
    for (size_t at = 0; at < pattern.size(); at += 5) {
      const size_t size = std::min<size_t>(5, pattern.size() - at);
      std::copy_n(pattern.begin() + at, size, spread[r].begin() + 2 * at);
      runs[r].push_back({spread[r].data() + 2 * at, size});
    }
    if (r == rank) spread[r] = pattern;  // to itself: contiguous (gathering is for peers)
    ConstBuffer& out = sends[r].emplace_back(spread[r].data(), pattern.size());
    if (r != rank) out.runs = runs[r];
    in[r].assign(Count(a.bytes, r, rank), 0xEE);
    recvs[r].emplace_back(in[r].data(), in[r].size());
    sent += r == rank ? 0 : pattern.size();
    received += r == rank ? 0 : in[r].size();
    for (int to = 0; to < n; ++to) any_gathered |= r != to && Count(a.bytes, r, to) > 0;
  }
  const absl::Status status = comm.AllToAllSegments(sends, recvs, /*check=*/7);
  if (!PreparedTransfer::Gathers(comm) && any_gathered) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is gathered")));
    SHARDKIT_EXPECT_OK(comm.Barrier());
    return;
  }
  SHARDKIT_ASSERT_OK(status);
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(in[r], Pattern(r, rank, in[r].size())) << "round " << round << " from " << r;
      std::fill(in[r].begin(), in[r].end(), 0xEE);
    }
    if (round == 0) {
      SHARDKIT_ASSERT_OK_AND_ASSIGN(
          PreparedTransfer again,
          PreparedTransfer::Prepare(comm, {RoundShape::Of(sends, recvs)}, /*check=*/7));
      SHARDKIT_ASSERT_OK(again.Run(0, sends, recvs));
      SHARDKIT_ASSERT_OK(again.Close());
    }
  }
  const OpCounters c = comm.counters(CollectiveOp::kAllToAllSegments);
  EXPECT_EQ(c.bytes_sent, 2 * sent);
  EXPECT_EQ(c.bytes_received, 2 * received);
}

}  // namespace shardkit::testing::conformance_internal

namespace shardkit::testing::conformance_internal {
namespace {

constexpr int kPreparedRounds = 3;

uint64_t TotalSize(const std::vector<uint64_t>& sizes) {
  uint64_t total = 0;
  for (uint64_t size : sizes) total += size;
  return total;
}

// Round k's segments from rank `from` to rank `to`: the pair's bytes for the round (they grow
// with k) cut in two where k says (the first may be empty).
std::vector<uint64_t> RoundCuts(int64_t bytes, int k, int from, int to) {
  const uint64_t size = Count(bytes == 0 ? 0 : bytes + 3 * k, from, to);
  const uint64_t cut = size / (k + 2);
  return {cut, size - cut};
}

// Every round's shape, as rank `rank` sees it.
std::vector<RoundShape> PreparedShapes(int64_t bytes, int rank, int n) {
  std::vector<RoundShape> shapes(kPreparedRounds);
  for (int k = 0; k < kPreparedRounds; ++k) {
    for (int r = 0; r < n; ++r) {
      shapes[k].sends.push_back(RoundCuts(bytes, k, rank, r));
      shapes[k].recvs.push_back(RoundCuts(bytes, k, r, rank));
    }
  }
  return shapes;
}

template <typename Buffer>
std::vector<Buffer> Cut(Buffer whole, const std::vector<uint64_t>& cuts) {
  std::vector<Buffer> pieces;
  uint64_t at = 0;
  for (uint64_t cut : cuts) {
    pieces.emplace_back(static_cast<uint8_t*>(const_cast<void*>(whole.data)) + at, cut,
                        whole.device);
    at += cut;
  }
  return pieces;
}

}  // namespace

// PreparedTransfer: three rounds of different shapes agreed once, run in order with a Barrier on
// the same communicator between two of them, round 2 run once more, then closed: every byte
// arrives, every segment is reported, only the preparation and the close count as calls. Then
// ranks that prepare different round counts, or cut one pair's bytes differently in the last
// round only, fail alike in the preparation, and the communicator stays usable.
void PreparedTransferCase(int rank, Communicator& comm, std::string_view arg) {
  const CaseArg a = Decode(arg);
  const int n = comm.world_size();
  comm.ResetCounters();
  const std::vector<RoundShape> shapes = PreparedShapes(a.bytes, rank, n);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(PreparedTransfer transfer,
                                PreparedTransfer::Prepare(comm, shapes, /*check=*/11));
  EXPECT_EQ(transfer.rounds(), static_cast<size_t>(kPreparedRounds));
  int64_t sent = 0, received = 0;
  auto run = [&](int k) {
    std::vector<Bytes> out, in;
    for (int r = 0; r < n; ++r) {
      out.emplace_back(Pattern(rank * 3 + k, r, TotalSize(shapes[k].sends[r])), a.device);
      in.emplace_back(TotalSize(shapes[k].recvs[r]), 0xEE, a.device);
    }
    std::vector<std::vector<ConstBuffer>> sends;
    std::vector<std::vector<MutableBuffer>> recvs;
    for (int r = 0; r < n; ++r) {
      sends.push_back(Cut<ConstBuffer>(out[r].buffer(), shapes[k].sends[r]));
      recvs.push_back(Cut(in[r].buffer(), shapes[k].recvs[r]));
      if (r != rank) sent += out[r].size(), received += in[r].size();
    }
    int reported = 0;
    auto arrived = [&](int, size_t) {
      ++reported;
      return absl::OkStatus();
    };
    const Communicator::SegmentArrived report(arrived);
    SHARDKIT_ASSERT_OK(transfer.Run(k, sends, recvs, &report));
    EXPECT_EQ(reported, 2 * n) << "round " << k;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(in[r].Read(), Pattern(r * 3 + k, rank, in[r].size()))
          << "round " << k << " from " << r;
    }
  };
  run(0);
  SHARDKIT_ASSERT_OK(comm.Barrier());
  run(1);
  run(2);
  run(2);
  SHARDKIT_ASSERT_OK(transfer.Close());
  const OpCounters c = comm.counters(CollectiveOp::kAllToAllSegments);
  EXPECT_EQ(c.calls, 2);
  EXPECT_EQ(c.bytes_sent, sent);
  EXPECT_EQ(c.bytes_received, received);
  if (n == 1) return;

  EXPECT_THAT(PreparedTransfer::Prepare(comm, {}, 11).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("invalid arguments on rank 0: prepared a transfer of no rounds")));
  std::vector<RoundShape> fewer(shapes.begin(), shapes.end() - (rank == 0 ? 1 : 0));
  EXPECT_THAT(PreparedTransfer::Prepare(comm, fewer, 11).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ranks disagree on the transfer: rank 0 prepared a transfer of 2 "
                                 "rounds, rank 1 prepared a transfer of 3 rounds")));
  // AllToAllSegments on one rank, a prepared transfer of one round on the others: refused alike.
  const std::vector<std::vector<ConstBuffer>> no_sends(n);
  const std::vector<std::vector<MutableBuffer>> no_recvs(n);
  const RoundShape empty{std::vector<std::vector<uint64_t>>(n),
                         std::vector<std::vector<uint64_t>>(n)};
  EXPECT_THAT(rank == 0 ? comm.AllToAllSegments(no_sends, no_recvs, 11)
                        : PreparedTransfer::Prepare(comm, {empty}, 11).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 0 called AllToAllSegments, rank 1 prepared a transfer of 1 "
                                 "round")));
  const int last = n - 1;
  const std::vector<uint64_t> cuts = RoundCuts(a.bytes, kPreparedRounds - 1, 0, last);
  if (cuts[0] > 0 && cuts[1] > 0) {  // the same on every rank
    std::vector<RoundShape> other = shapes;
    if (rank == last) other.back().recvs[0] = {cuts[0] + cuts[1]};
    EXPECT_THAT(PreparedTransfer::Prepare(comm, other, 11).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("segment sizes disagree: rank 0 sends "))));
  }
  SHARDKIT_EXPECT_OK(comm.Barrier());
}

}  // namespace shardkit::testing::conformance_internal
