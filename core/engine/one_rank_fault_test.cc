// A failure on one rank alone in Reshard, ShardedTensor::Gather and ShardParameter — an allocation
// of a new shard, of the send wire, of a packing buffer, of the staging buffer; ShardParameter's
// source pack, a broadcast receive buffer, a copy of the source's own shard — on 2 and 4 forked
// ranks over real Gloo on 127.0.0.1: every rank returns the same error (the same first line), at
// once, not at the operation's deadline. The victim does not leave early: like a program that
// goes on, it lives until every rank has its result (a file each, in a directory of the test).
// Also: a reshard into shards on a device the backend cannot move fails on every rank alike.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/engine/reshard.h"
#include "core/engine/shard_parameter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "specs/spec_json.h"
#include "testing/faults.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::AllocationFault;
using ::shardkit::testing::FreshTestDir;
using ::shardkit::testing::RankOptions;
using ::shardkit::testing::RunRanks;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The operation's deadline; every rank must have its error well before it.
constexpr absl::Duration kDeadline = absl::Seconds(4);
constexpr int kDst = 0;  // Gather's destination, ShardParameter's source

// ShardParameter's cases shard "w" under the fault: by columns (the source packs what it
// sends), by rows (each rank's part is contiguous: nothing packed), or by rows with broadcast.
enum class Op { kReshard, kGather, kScatterColumns, kScatterRows, kBroadcastRows };

struct Case {
  Op op;
  bool victim_is_dst;  // else the last rank (never the destination or source)
  int skip;            // allocations the victim makes before the one that fails
  const char* step;    // what the victim's error names
};

bool IsShard(Op op) { return op != Op::kReshard && op != Op::kGather; }

specs::ShardingSpec ChunkSpec(int dim) {
  return *specs::ParseSpec(
      absl::StrFormat(R"({"type":"chunk","dim":%d,"placements":{"ranks":"all"}})", dim));
}

// "w" (float32 [4W, 2W]) in 2W row blocks, every rank holding two: Gather's senders pack them,
// its destination stages them. Reshard moves it to column blocks, one per rank, each built from
// every rank's rows.
specs::ShardingSpec TwoBlocksPerRank(int world) {
  std::string placements;
  for (int i = 0; i < 2 * world; ++i) {
    placements += absl::StrFormat("%s\"rank:%d\"", i == 0 ? "" : ",", i % world);
  }
  return *specs::ParseSpec(
      absl::StrFormat(R"({"type":"chunk","dim":0,"placements":[%s]})", placements));
}

std::string ResultPath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank", rank);
}

// Writes "<seconds>\n<status>" whole (rename), then waits until every rank has written its own.
void ReportAndWait(const std::string& dir, int rank, int world, absl::Duration elapsed,
                   const absl::Status& status) {
  const std::string path = ResultPath(dir, rank);
  {
    std::ofstream out(path + ".tmp");
    out << absl::ToDoubleSeconds(elapsed) << "\n" << status.ToString();
  }
  std::filesystem::rename(path + ".tmp", path);
  const absl::Time give_up = absl::Now() + 3 * kDeadline;
  for (int r = 0; r < world && absl::Now() < give_up;) {
    if (std::filesystem::exists(ResultPath(dir, r))) {
      ++r;
    } else {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
}

struct Result {
  double seconds = -1;
  std::string first_line;
  std::string text;
};

Result ReadResult(const std::string& dir, int rank) {
  Result result;
  std::ifstream in(ResultPath(dir, rank));
  std::string seconds;
  if (!std::getline(in, seconds) || !absl::SimpleAtod(seconds, &result.seconds)) return result;
  std::getline(in, result.first_line);
  std::stringstream rest;
  rest << in.rdbuf();
  result.text = result.first_line + "\n" + rest.str();
  return result;
}

void RunFaultCase(int world, const Case& c) {
  const int victim = c.victim_is_dst ? kDst : world - 1;
  const std::string dir = FreshTestDir("first-lines");
  RankOptions options;
  options.deadline = absl::Seconds(60);
  SHARDKIT_EXPECT_OK(RunRanks(
      world, "gloo",
      [&](int rank, Communicator& comm) {
        SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor full,
                                      Tensor::Arange({4 * world, 2 * world}, DType::kFloat32));
        Module module;
        SHARDKIT_ASSERT_OK(
            module.AddParameter("w", rank == 0 ? full : *Tensor::Meta(full.shape(), full.dtype())));
        // ShardParameter's cases shard "w" under the fault; Reshard's and Gather's shard it first.
        ShardOptions shard;
        shard.src_rank = kDst;
        shard.strategy = c.op == Op::kBroadcastRows ? Strategy::kBroadcast : Strategy::kScatter;
        shard.call.timeout = kDeadline;
        const ShardedTensor* st = nullptr;
        Tensor out;  // allocated before the fault: the destination's staging is then the first
        if (!IsShard(c.op)) {
          SHARDKIT_ASSERT_OK(ShardParameter(module, "w", TwoBlocksPerRank(world), comm));
          SHARDKIT_ASSERT_OK_AND_ASSIGN(st, module.GetSharded("w"));
          if (rank == kDst) {
            SHARDKIT_ASSERT_OK_AND_ASSIGN(out, Tensor::Empty(full.shape(), full.dtype()));
          }
        }
        SHARDKIT_ASSERT_OK(comm.Barrier());

        absl::Status status;
        const absl::Time start = absl::Now();
        {
          std::optional<AllocationFault> fault;
          if (rank == victim) fault.emplace(c.skip);
          if (c.op == Op::kReshard) {
            status = Reshard(*st, ChunkSpec(1), comm, shard.call).status();
          } else if (c.op == Op::kGather) {
            status = st->Gather(kDst, rank == kDst ? &out : nullptr, comm, shard.call);
          } else {
            status = ShardParameter(module, "w", ChunkSpec(c.op == Op::kScatterColumns ? 1 : 0),
                                    comm, shard);
            EXPECT_TRUE(module.GetTensor("w").ok()) << "the slot changed";
          }
          if (fault.has_value()) {
            EXPECT_TRUE(fault->fired()) << "no allocation failed";
          }
        }
        const absl::Duration elapsed = absl::Now() - start;
        std::fprintf(stderr, "rank %d: error after %.3f s: %s\n", rank,
                     absl::ToDoubleSeconds(elapsed), status.ToString().c_str());
        ReportAndWait(dir, rank, world, elapsed, status);
      },
      options));

  const Result first = ReadResult(dir, 0);
  for (int rank = 0; rank < world; ++rank) {
    const Result result = ReadResult(dir, rank);
    ASSERT_GE(result.seconds, 0) << "rank " << rank << " reported nothing";
    EXPECT_LT(result.seconds, absl::ToDoubleSeconds(kDeadline / 2))
        << "rank " << rank << " waited for the deadline: " << result.text;
    EXPECT_EQ(result.first_line, first.first_line) << "rank " << rank << " vs rank 0";
    EXPECT_THAT(result.first_line, StartsWith("RESOURCE_EXHAUSTED: "));
    EXPECT_THAT(result.first_line, HasSubstr(absl::StrCat("rank ", victim, ": ")));
    EXPECT_THAT(result.first_line, HasSubstr(c.step));
    EXPECT_THAT(result.first_line, HasSubstr("(injected)"));
  }
}

class OneRankFaults : public ::testing::TestWithParam<int> {};

TEST_P(OneRankFaults, ReshardNewShardAllocation) {
  RunFaultCase(GetParam(),
               {.op = Op::kReshard, .victim_is_dst = false, .skip = 0, .step = "new shard"});
}

TEST_P(OneRankFaults, ReshardSendWireAllocation) {
  RunFaultCase(GetParam(),
               {.op = Op::kReshard, .victim_is_dst = false, .skip = 1, .step = "send wire"});
}

TEST_P(OneRankFaults, GatherPackOnSender) {
  RunFaultCase(GetParam(), {.op = Op::kGather,
                            .victim_is_dst = false,
                            .skip = 0,
                            .step = "packing this rank's 2 shards"});
}

TEST_P(OneRankFaults, GatherStagingOnDestination) {
  RunFaultCase(GetParam(), {.op = Op::kGather,
                            .victim_is_dst = true,
                            .skip = 0,
                            .step = "staging what other ranks send"});
}

TEST_P(OneRankFaults, ShardScatterSourcePack) {
  RunFaultCase(GetParam(), {.op = Op::kScatterColumns,
                            .victim_is_dst = true,
                            .skip = 0,
                            .step = "packing the source's non-contiguous shards"});
}

TEST_P(OneRankFaults, ShardBroadcastReceiveBuffer) {
  RunFaultCase(GetParam(), {.op = Op::kBroadcastRows,
                            .victim_is_dst = false,
                            .skip = 0,
                            .step = "the buffer that receives each broadcast parameter whole"});
}

TEST_P(OneRankFaults, ShardScatterSourceOwnShardCopy) {
  RunFaultCase(GetParam(), {.op = Op::kScatterRows,
                            .victim_is_dst = true,
                            .skip = 0,
                            .step = "parameter \"w\": copying own shard 0"});
}

// A module of one parameter "w", an Arange of `shape` (F32) held by rank 0, sharded by rows over
// every rank (what the Reshard cases below start from).
absl::StatusOr<Module> RowShardedW(int rank, Communicator& comm, const Shape& shape) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor full, Tensor::Arange(shape, DType::kFloat32));
  SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(shape, DType::kFloat32));
  Module module;
  SHARDKIT_RETURN_IF_ERROR(module.AddParameter("w", rank == 0 ? full : meta));
  SHARDKIT_RETURN_IF_ERROR(ShardParameter(module, "w", ChunkSpec(0), comm));
  return module;
}

// A reshard into shards on a device Gloo cannot move (CUDA, placed by the spec): every rank
// refuses before any byte moves, naming the new shard and the device, and the input is kept.
TEST(ReshardDevices, AShardTheBackendCannotMoveIsEveryRanksError) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "gloo", [](int rank, Communicator& comm) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Module module, RowShardedW(rank, comm, {8, 4}));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(
        specs::ShardingSpec to,
        specs::ParseSpec(
            R"({"type":"chunk","dim":1,"placements":{"ranks":"all","device":"cuda"}})"));
    const absl::Status status = Reshard(*st, to, comm).status();
    EXPECT_THAT(status, testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("new shard"),
                                                HasSubstr("which this backend cannot move"))));
    EXPECT_THAT(status.message(), HasSubstr("rank 0"));  // the same first line on every rank
    EXPECT_EQ(st->local_shards().size(), 1u);
    EXPECT_EQ(st->local_shards().front().tensor.device(), Device::Cpu());
  }));
}

// Reshard with the least staging (ReshardOptions::memory_bytes raised to 64 KiB) cuts rows ->
// columns of 512 KiB into several rounds (3/4 of each rank's 128 KiB shard leaves it, through
// buckets of 21 KiB) and moves every byte as the default budget does, in one round.
TEST(ReshardBudgets, TheLeastStagingMovesEveryByteAsTheDefault) {
  SHARDKIT_EXPECT_OK(RunRanks(4, "gloo", [](int rank, Communicator& comm) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Module module, RowShardedW(rank, comm, {512, 256}));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
    // A prepared transfer counts its preparation, and its close when more than one round ran.
    comm.ResetCounters();
    SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardedTensor wide, Reshard(*st, ChunkSpec(1), comm));
    EXPECT_EQ(comm.counters(CollectiveOp::kAllToAllSegments).calls, 1);  // one round
    comm.ResetCounters();
    SHARDKIT_ASSERT_OK_AND_ASSIGN(
        ShardedTensor small, Reshard(*st, ChunkSpec(1), comm, ReshardOptions{.memory_bytes = 1}));
    EXPECT_EQ(comm.counters(CollectiveOp::kAllToAllSegments).calls, 2);  // several rounds
    ASSERT_EQ(small.local_shards().size(), 1u);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(auto expected, wide.local_shards().front().tensor.Bytes());
    SHARDKIT_ASSERT_OK_AND_ASSIGN(auto got, small.local_shards().front().tensor.Bytes());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin(), expected.end()));
  }));
}

// Ranks given different budgets would plan different rounds: the agreement refuses it on every
// rank before any byte moves, naming the field.
TEST(ReshardBudgets, DifferentBudgetsAreEveryRanksError) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "gloo", [](int rank, Communicator& comm) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Module module, RowShardedW(rank, comm, {8, 4}));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(const ShardedTensor* st, module.GetSharded("w"));
    const ReshardOptions options{.memory_bytes = int64_t{rank + 1} << 20};
    const absl::Status status = Reshard(*st, ChunkSpec(1), comm, options).status();
    EXPECT_THAT(status,
                testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("memory_bytes")));
    SHARDKIT_EXPECT_OK(comm.Barrier());  // the communicator is still usable
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, OneRankFaults, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrFormat("World%d", info.param);
                         });

}  // namespace
}  // namespace shardkit
