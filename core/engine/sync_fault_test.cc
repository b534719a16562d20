// Weight sync's errors on 4 forked Gloo ranks (sources 0, 1; destinations 2, 3): the agreement's
// (the same message on every rank), the per-call fingerprint check, verify's mismatch, and a
// source rank killed or stalled mid-sync (every other rank fails within the deadline, naming it
// when it died; destinations report which parameters were completely updated).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/sync.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "specs/layout.h"
#include "specs/spec_json.h"
#include "testing/faults.h"
#include "testing/multiprocess.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::RankGroup;
using ::shardkit::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const SyncGroups kGroups{{0, 1}, {2, 3}};

// A ShardedTensor of `shape` chunked on `dim` over a group of 2, this group rank's shard filled
// with `fill` bytes.
ShardedTensor Chunked(const Shape& shape, int dim, int group_rank, int fill) {
  const specs::ShardingSpec spec = *specs::ParseSpec(
      absl::StrCat(R"({"type": "chunk", "dim": )", dim, R"(, "placements": {"ranks": "all"}})"));
  ShardedTensor st = *ShardedTensor::Zeros(shape, DType::kFloat32, spec, 2, group_rank);
  for (const LocalShard& shard : st.local_shards()) {
    std::memset(shard.tensor.data(), fill, shard.tensor.nbytes());
  }
  return st;
}

Module ModuleOf(std::vector<std::pair<std::string, ShardedTensor>> tensors) {
  Module m;
  for (auto& [name, st] : tensors) {
    EXPECT_TRUE(m.AddParameter(name, Tensor()).ok());
    EXPECT_TRUE(m.SetSharded(name, std::move(st)).ok());
  }
  return m;
}

// Rank r's modules for a small model: "w" [8, 6] rows on the sources, columns on the destinations.
struct Sides {
  std::optional<Module> source, destination;
  const Module* src() const { return source ? &*source : nullptr; }
  Module* dst() { return destination ? &*destination : nullptr; }
};

Sides SmallSides(int rank, Shape destination_shape = {8, 6}, int destination_dim = 1) {
  Sides s;
  if (rank < 2) s.source = ModuleOf({{"w", Chunked({8, 6}, 0, rank, 1)}});
  if (rank >= 2) {
    s.destination = ModuleOf({{"w", Chunked(destination_shape, destination_dim, rank - 2, 0)}});
  }
  return s;
}

std::vector<std::string> AllMessages(Communicator& comm, const absl::Status& status) {
  const std::string mine(status.message());
  absl::StatusOr<std::vector<std::string>> all = comm.AllGather(ConstBuffer(mine));
  EXPECT_TRUE(all.ok()) << all.status();
  return all.ok() ? *all : std::vector<std::string>{};
}

// Every rank gets the same kInvalidArgument, containing `expected`.
void ExpectSameError(Communicator& comm, const absl::StatusOr<SyncPlan>& plan,
                     const std::string& expected) {
  EXPECT_THAT(plan.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(expected)));
  const std::vector<std::string> all = AllMessages(comm, plan.status());
  EXPECT_THAT(all, Each(all.empty() ? "" : all[0]));
}

void GroupsDiffer(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank);
  SyncGroups groups = kGroups;
  if (rank == 3) groups.destination = {3, 2};
  ExpectSameError(comm, PlanSync(s.src(), s.dst(), groups, comm), "rank 3 passed groups");
}

void MissingModule(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank);
  ExpectSameError(comm, PlanSync(s.src(), rank == 2 ? nullptr : s.dst(), kGroups, comm),
                  "rank 2 is in the destination group but passed no destination module");
}

void ShapesDiffer(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank, {8, 4});
  ExpectSameError(comm, PlanSync(s.src(), s.dst(), kGroups, comm),
                  R"(parameter "w": source is float32[8,6], destination is float32[8,4])");
}

void DestinationLayoutsDiffer(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank, {8, 6}, rank == 3 ? 0 : 1);
  ExpectSameError(comm, PlanSync(s.src(), s.dst(), kGroups, comm),
                  "rank 3's destination layout differs from rank 2's");
}

void StridedDestination(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank);
  if (rank == 2) {
    Tensor wide = *Tensor::Zeros({4, 8}, DType::kFloat32);
    ASSERT_TRUE(s.destination->AddParameter("r", *wide.Narrow(1, 0, 4)).ok());
  }
  ExpectSameError(comm, PlanSync(s.src(), s.dst(), kGroups, comm),
                  R"(rank 2: destination parameter "r": Tensor(float32[4, 4], cpu) is not )"
                  R"(contiguous)");
}

TEST(SyncErrors, TheAgreementFailsAlikeOnEveryRank) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(4, testing::TestBackend()));
  SHARDKIT_EXPECT_OK(group->Run(&GroupsDiffer));
  SHARDKIT_EXPECT_OK(group->Run(&MissingModule));
  SHARDKIT_EXPECT_OK(group->Run(&ShapesDiffer));
  SHARDKIT_EXPECT_OK(group->Run(&DestinationLayoutsDiffer));
  SHARDKIT_EXPECT_OK(group->Run(&StridedDestination));
}

// The per-call check: a rank with another plan's fingerprint is refused by the exchange's header.
void CheckValuesDiffer(int rank, Communicator& comm, std::string_view) {
  std::vector<std::vector<ConstBuffer>> sends(4);
  std::vector<std::vector<MutableBuffer>> recvs(4);
  const absl::Status status = comm.AllToAllSegments(sends, recvs, rank == 1 ? 7 : 5);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("rank 0 passed 5, rank 1 passed 7")));
}

// verify: rank 3 changes one received byte before the digests; every rank names that piece.
void VerifyMismatch(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(SyncPlan plan, PlanSync(s.src(), s.dst(), kGroups, comm));
  SyncCallOptions options{.verify = true};
  if (rank == 3) {
    options.after_move_for_test = [&s] {
      (*s.destination->GetSharded("w"))->local_shards()[0].tensor.data()[5] = std::byte{9};
    };
  }
  const absl::Status status = Sync(plan, s.src(), s.dst(), comm, options);
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr(R"(parameter "w" piece at [0,3] of [4,3] from rank 0 to rank 3)")));
  const std::vector<std::string> all = AllMessages(comm, status);
  EXPECT_THAT(all, Each(all.empty() ? "" : all[0]));
}

// verify: rank 3 can no longer compute its digests (its module emptied after the move); every rank
// fails alike, naming rank 3 and why, instead of waiting for its digests.
void VerifyCannotDigest(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(SyncPlan plan, PlanSync(s.src(), s.dst(), kGroups, comm));
  SyncCallOptions options{.verify = true};
  if (rank == 3) options.after_move_for_test = [&s] { *s.destination = Module(); };
  const absl::Status status = Sync(plan, s.src(), s.dst(), comm, options);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr(R"(Sync verify: rank 3: FAILED_PRECONDITION: destination )"
                                         R"(parameter "w" is not in the module)")));
  const std::vector<std::string> all = AllMessages(comm, status);
  EXPECT_THAT(all, Each(all.empty() ? "" : all[0]));
}

// A module of other shapes at the call on rank 3 (its shard [8, 2] where the plan has [8, 3]): it
// is found before any byte moves, rank 3 says what, and every other rank fails the first round's
// size agreement instead of waiting for rank 3's bytes.
void OtherShapesAtTheCall(int rank, Communicator& comm, std::string_view) {
  Sides s = SmallSides(rank);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(SyncPlan plan, PlanSync(s.src(), s.dst(), kGroups, comm));
  if (rank == 3) s.destination = ModuleOf({{"w", Chunked({8, 4}, 1, 1, 0)}});
  const absl::Status status = Sync(plan, s.src(), s.dst(), comm);
  if (rank == 3) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr(R"(parameter "w": shard 1 of shape [8, 2] does not )"
                                           R"(hold the planned piece)")));
  } else {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 3")));
  }
}

TEST(SyncErrors, FingerprintAndVerify) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(4, testing::TestBackend()));
  SHARDKIT_EXPECT_OK(group->Run(&CheckValuesDiffer));
  SHARDKIT_EXPECT_OK(group->Run(&VerifyMismatch));
  SHARDKIT_EXPECT_OK(group->Run(&VerifyCannotDigest));
  SHARDKIT_EXPECT_OK(group->Run(&OtherShapesAtTheCall));
}

constexpr absl::Duration kDeadline = absl::Seconds(2);

// "small" [64, 64] comes first (round 1, rows to rows: coalesced); "w" [1024, 4096] (16 MiB,
// columns to rows: received strided, so staged) follows in rounds of a third of 1 MiB, which
// staging keeps apart (merged rounds would be one). Rank 1 (`fault`) acts before its third round,
// which moves without an agreement (on host memory) and in which ranks 0 and 1 share no piece.
// Every other rank's error starts with `first_line`, naming rank 1, wherever it was waiting (on
// rank 1 itself, or on a rank that waited on it: rank 0 at the last round's agreement) when its
// deadline passed or its peer left.
void FaultCase(const std::function<void()>& fault, const std::string& first_line) {
  testing::RankOptions options;
  options.deadline = absl::Seconds(30);
  options.may_die = {1};
  SHARDKIT_EXPECT_OK(testing::RunRanks(
      4, testing::TestBackend(),
      [&fault, &first_line](int rank, Communicator& comm) {
        Sides s;
        if (rank < 2) {
          s.source = ModuleOf(
              {{"small", Chunked({64, 64}, 0, rank, 2)}, {"w", Chunked({1024, 4096}, 1, rank, 1)}});
        } else {
          s.destination = ModuleOf({{"small", Chunked({64, 64}, 0, rank - 2, 0)},
                                    {"w", Chunked({1024, 4096}, 0, rank - 2, 0)}});
        }
        SHARDKIT_ASSERT_OK_AND_ASSIGN(
            SyncPlan plan, PlanSync(s.src(), s.dst(), kGroups, comm, {.memory_bytes = 1 << 20}));
        SHARDKIT_ASSERT_OK(Sync(plan, s.src(), s.dst(), comm));  // a healthy first call
        SyncCallOptions options{.call = {.timeout = kDeadline}};
        if (rank == 1) {
          // Before the third round: rounds 1-2 moved (and "small" with them), the rest not.
          options.before_round_for_test = [&fault](int round) {
            if (round == 2) fault();
          };
        }
        SyncReport report;
        const absl::Time start = absl::Now();
        const absl::Status status = Sync(plan, s.src(), s.dst(), comm, options, &report);
        const absl::Duration elapsed = absl::Now() - start;
        std::fprintf(stderr, "rank %d: error after %.3f s: %s\n", rank,
                     absl::ToDoubleSeconds(elapsed), status.ToString().c_str());
        if (rank == 1) return;  // a stalled victim fails too, in its own way
        EXPECT_THAT(status.code(),
                    AnyOf(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kUnavailable));
        EXPECT_EQ(std::string(status.message()).substr(0, status.message().find('\n')), first_line);
        EXPECT_LT(elapsed, kDeadline + absl::Seconds(2));
        if (rank >= 2) {
          EXPECT_THAT(report.updated, ElementsAre("small"));
        }
      },
      options));
}

TEST(SyncFaults, SourceKilledMidSync) {
  FaultCase([] { raise(SIGKILL); },
            "Sync failed: rank 1 went away without closing its communicator (killed or crashed?)");
}

TEST(SyncFaults, SourceStalledPastTheDeadline) {
  // Rank 2 and 3 wait on rank 1's bytes, rank 0 on the next round's headers, through the tree.
  FaultCase([] { testing::StallFor(kDeadline + absl::Seconds(1)); },
            "Sync failed: rank 1 stopped making progress (stalled? the ranks waiting on it "
            "reached their deadline)");
}

}  // namespace
}  // namespace shardkit
