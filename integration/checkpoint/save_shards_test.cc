// SaveShards and LoadShards over real Gloo across forked ranks, with real files: a module sharded
// over 4 ranks (rows, uneven columns, an enumerable spec with two shards on one rank, a replicated
// parameter, a non-contiguous replicated view saved through a tiny staging budget) is saved, then
// gathered (GatherCheckpoint, as `shardkit gather`) and inspected, loaded back at 4 ranks with the
// same plan and at 2 and 3 ranks with another (rows <-> columns, enumerable, replicated); every
// shard is checked against the full tensors. And a load by columns of a directory saved by rows
// preads its columns, not the rows (bytes_read). The errors: save_shards_errors_test.cc.
#include "integration/checkpoint/save_shards.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/comm/collective_status.h"
#include "core/engine/shard_parameter.h"
#include "core/os/dir_lock.h"
#include "core/os/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/inspect.h"
#include "integration/checkpoint/reshard_checkpoint.h"
#include "integration/checkpoint/save_shards_fixture.h"
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/formats/safetensors/safetensors.h"
#include "nlohmann/json.hpp"
#include "specs/plan.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

using Json = nlohmann::json;
using save_fixture::ExpectLoaded;
using save_fixture::Full;
using save_fixture::kParams;
using save_fixture::LoadPlan;
using save_fixture::MetaModule;
using save_fixture::SameBytes;
using save_fixture::SavePlan;
using save_fixture::ShardedModule;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// DCP_SHARDING_INFO of rank r's file under SavePlan on 4 ranks, as torch's
// HuggingFaceStorageReader reads it: every tensor of the file with its offsets (replicated: 0),
// but NAME#K ones.
Json ShardingInfo(int rank) {
  const int64_t embed_row[] = {0, 3, 6, 9}, proj_col[] = {0, 2, 4, 5};  // 7 columns: 2, 2, 1, 0
  auto at = [](Json offsets) { return Json{{"saved_offsets", std::move(offsets)}}; };
  Json info = {{"embed.weight", at({embed_row[rank], 0})},
               {"layers.0.proj.weight", at({0, proj_col[rank]})},
               {"norm.weight", at({0})},
               {"cols.view", at({0, 0})}};
  // Rank 0's head.weight#0 and #2 are left out: torch's reader then refuses the directory.
  if (rank == 1) info["head.weight"] = at({3, 0});
  return info;
}

// Elements [first, last) of a row-major tensor of `shape` that `shard` spans (its first element to
// its last); {0, 0} when empty.
std::pair<int64_t, int64_t> ElementSpan(const Shape& shape, const specs::ShardMetadata& shard) {
  int64_t first = 0, last = 0, stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shard.sizes[d] == 0) return {0, 0};
    first += shard.offsets[d] * stride;
    last += (shard.offsets[d] + shard.sizes[d] - 1) * stride;
    stride *= shape[d];
  }
  return {first, last + 1};
}

// The old rank files a load must read from, at most: for each new shard of this rank, those whose
// old shards lie in the span of elements it covers (short pieces are staged from that span, never
// past it); rank 0's for a replicated parameter (gather's source copy).
int64_t FilesInSpans(const ShardIndex& index, const Module& loaded, int rank) {
  std::set<int64_t> files;
  for (const IndexParameter& old : index.parameters) {
    if (!*loaded.IsSharded(old.name)) {
      files.insert(0);
      continue;
    }
    const ShardedTensor& st = **loaded.GetSharded(old.name);
    for (const LocalShard& mine : st.local_shards()) {
      const auto [first, last] = ElementSpan(old.shape, st.shards()[mine.index]);
      for (const IndexShard& shard : old.shards) {
        const auto [begin, end] = ElementSpan(old.shape, shard.metadata);
        if (begin < last && first < end) files.insert(shard.metadata.placement.rank());
      }
    }
  }
  return static_cast<int64_t>(files.size());
}

// World 4: save; rank 0 gathers and inspects the directory; load back with the same plan. Rank
// 0's metadata is in index.json and every rank file, whatever the others pass; each rank file
// adds DCP_SHARDING_INFO, its tensors' offsets; `gather` gives back rank 0's metadata only.
void SaveCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  const Module module = ShardedModule(comm);
  const std::map<std::string, std::string> metadata = {{"step", rank == 0 ? "7" : "other"}};
  ASSERT_THAT(SaveShards(dir, module, comm, {.memory_bytes = 8, .metadata = metadata}),
              testing::IsOk());
  for (int r = 0; r < comm.world_size(); ++r) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(safetensors::Reader file,
                                  safetensors::Reader::Open(fs::path(dir) / RankFileName(r)));
    std::map<std::string, std::string> got = file.header().metadata;
    const auto info = got.extract("DCP_SHARDING_INFO");
    ASSERT_FALSE(info.empty()) << RankFileName(r) << " has no DCP_SHARDING_INFO";
    EXPECT_EQ(Json::parse(info.mapped(), nullptr, false), ShardingInfo(r)) << RankFileName(r);
    EXPECT_EQ(got, (std::map<std::string, std::string>{{"step", "7"}})) << RankFileName(r);
  }
  absl::Status checked;
  if (rank == 0) {
    EXPECT_FALSE(fs::exists(fs::path(dir) / os::kLockFileName));  // removed as rank 0 let go
    SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardIndex index, ReadIndex(dir));
    EXPECT_EQ(index.written_by, WrittenBy::kSave);
    EXPECT_EQ(index.src_rank, 0);
    EXPECT_EQ(index.world_size, comm.world_size());
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Inspection inspection, InspectPath(dir));
    EXPECT_EQ(inspection.kind, InspectedKind::kShardDirectory);
    EXPECT_THAT(inspection.facts, ::testing::Contains(::testing::Pair("strategy", "save")));
    EXPECT_EQ(inspection.rows.size(), std::size(kParams));
    std::ostringstream log;
    const std::string out = dir + "-gathered.safetensors";
    ASSERT_THAT(GatherCheckpoint(dir, out, log), testing::IsOk()) << log.str();
    SHARDKIT_ASSERT_OK_AND_ASSIGN(safetensors::Reader reader, safetensors::Reader::Open(out));
    EXPECT_EQ(reader.header().metadata, (std::map<std::string, std::string>{{"step", "7"}}));
    EXPECT_EQ(reader.header().tensors.size(), std::size(kParams));
    for (size_t i = 0; i < std::size(kParams); ++i) {
      SHARDKIT_ASSERT_OK_AND_ASSIGN(const safetensors::TensorInfo* info,
                                    reader.Find(kParams[i].name));
      const Tensor full = Full(i);
      std::vector<std::byte> bytes(info->end - info->begin);
      ASSERT_THAT(reader.ReadBytes(*info, 0, bytes.size(), bytes.data()), testing::IsOk());
      EXPECT_TRUE(SameBytes(*Tensor::FromBytes(info->shape, info->dtype, bytes), full))
          << kParams[i].name;
    }
  }
  Module loaded = MetaModule();
  LoadShardsStats stats;
  ASSERT_THAT(LoadShards(dir, loaded, SavePlan(), comm, {.stats = &stats}), testing::IsOk());
  ExpectLoaded(loaded, rank);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardIndex index, ReadIndex(dir));
  EXPECT_EQ(stats.files_read, FilesInSpans(index, loaded, rank)) << "rank " << rank;
  for (const char* name : {"embed.weight", "layers.0.proj.weight", "head.weight"}) {
    EXPECT_EQ((*loaded.GetSharded(name))->shards(), (*module.GetSharded(name))->shards()) << name;
  }
  // Slots that hold ShardedTensors already are laid out anew.
  ASSERT_THAT(LoadShards(dir, loaded, LoadPlan(comm.world_size()), comm), testing::IsOk());
  ExpectLoaded(loaded, rank);
  EXPECT_TRUE(*loaded.IsSharded("norm.weight"));
  EXPECT_FALSE(*loaded.IsSharded("head.weight"));
}

// World 1, 2 or 3: the world-4 directory laid out by LoadPlan; then `shardkit reshard` of it
// (ShardCheckpoint) to this world, loaded with the same plan.
void LoadCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  const specs::Plan plan = LoadPlan(comm.world_size());
  Module module = MetaModule();
  ASSERT_THAT(LoadShards(dir, module, plan, comm), testing::IsOk());
  ExpectLoaded(module, rank);
  EXPECT_TRUE(*module.IsSharded("norm.weight"));
  EXPECT_FALSE(*module.IsSharded("head.weight"));
  const std::string suffix = absl::StrCat("-reshard", comm.world_size());
  if (rank == 0) {
    ASSERT_THAT(os::WriteFileAtomically(dir + suffix + ".json", specs::CanonicalJson(plan)),
                testing::IsOk());
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "plan written"), testing::IsOk());
  std::ostringstream log;
  ASSERT_THAT(
      ReshardCheckpoint(
          {.in_dir = dir, .write = {.plan_path = dir + suffix + ".json", .out_dir = dir + suffix}},
          comm, log),
      testing::IsOk());
  // Rank 0 writes the index after the others returned: wait for it (SaveShards itself does).
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "index written"), testing::IsOk());
  Module resharded = MetaModule();
  ASSERT_THAT(LoadShards(dir + suffix, resharded, plan, comm), testing::IsOk());
  ExpectLoaded(resharded, rank);
}

TEST(SaveShards, SaveAtFourLoadAtFourOneTwoAndThree) {
  const std::string dir = testing::TestPath("saved4");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * four, testing::RankGroup::Shared(4, "gloo"));
  ASSERT_THAT(four->Run(&SaveCase, dir), testing::IsOk());
  for (int world : {1, 2, 3}) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group,
                                  testing::RankGroup::Shared(world, "gloo"));
    EXPECT_THAT(group->Run(&LoadCase, dir), testing::IsOk()) << world;
  }
}

// World 3: a [64, 4096] F32 parameter saved by rows, loaded by columns — each rank a third of
// every 16 KiB row. It preads its own columns (one pread each), not the rows around them: at most
// 1.25 x its shard (TensorBytesReader::Want).
void ColumnsOfRowsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  const auto plan = [](int dim) {
    const std::string spec =
        absl::StrCat(R"({"type": "chunk", "dim": )", dim, R"(, "placements": {"ranks": "all"}})");
    return *specs::ParsePlan(absl::StrCat(R"({"rules": [{"match": "w", "spec": )", spec, "}]}"));
  };
  const Tensor full = *Tensor::Arange({64, 4096}, DType::kFloat32, 1);
  Module module;
  ASSERT_THAT(module.AddParameter("w", full), testing::IsOk());
  ASSERT_THAT(ShardModule(module, plan(0), comm), testing::IsOk());
  ASSERT_THAT(SaveShards(dir, module, comm), testing::IsOk());
  Module loaded;
  ASSERT_THAT(loaded.AddParameter("w", *Tensor::Meta({64, 4096}, DType::kFloat32)),
              testing::IsOk());
  LoadShardsStats stats;
  ASSERT_THAT(LoadShards(dir, loaded, plan(1), comm, {.stats = &stats}), testing::IsOk());
  const ShardedTensor& st = **loaded.GetSharded("w");
  ASSERT_EQ(st.local_shards().size(), 1u);
  const LocalShard& mine = st.local_shards()[0];
  EXPECT_TRUE(SameBytes(mine.tensor, *NarrowToShard(full, st.shards()[mine.index])));
  EXPECT_EQ(stats.files_read, comm.world_size()) << "every old file holds some of its rows";
  EXPECT_LE(stats.bytes_read * 4, mine.tensor.nbytes() * 5)
      << "rank " << rank << " read " << stats.bytes_read << " bytes for its "
      << mine.tensor.nbytes();
}

TEST(LoadShards, ColumnsOfRowsReadOnlyTheirBytes) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group, testing::RankGroup::Shared(3, "gloo"));
  EXPECT_THAT(group->Run(&ColumnsOfRowsCase, testing::TestPath("columns-of-rows")),
              testing::IsOk());
}

}  // namespace
}  // namespace shardkit::checkpoint
