// SaveShards and LoadShards over real Gloo across forked ranks, with real files: a module sharded
// over 4 ranks (rows, uneven columns, an enumerable spec with two shards on one rank, a replicated
// parameter, a non-contiguous replicated view saved through a tiny staging budget) is saved, then
// gathered (GatherCheckpoint, as `shardkit gather`) and inspected, loaded back at 4 ranks with the
// same plan and at 2 and 3 ranks with another (rows <-> columns, enumerable, replicated); every
// shard is checked against the full tensors. Then the errors: module vs. directory mismatches,
// disagreeing ranks, a missing directory, foreign files, a rank failing before the commit. And a
// load by columns of a directory saved by rows preads its columns, not the rows (bytes_read).
#include "integration/checkpoint/save_shards.h"

#include <signal.h>
#include <sys/resource.h>

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
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/shard_dir/shard_dir.h"
#include "nlohmann/json.hpp"
#include "specs/plan.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

struct Param {
  const char* name;
  Shape shape;
  DType dtype;
};
const Param kParams[] = {{"embed.weight", {10, 6}, DType::kFloat32},
                         {"layers.0.proj.weight", {7, 5}, DType::kInt32},
                         {"head.weight", {6, 4}, DType::kBFloat16},
                         {"norm.weight", {4}, DType::kFloat32},
                         {"cols.view", {5, 3}, DType::kInt16}};

// The full value of parameter i, the same on every rank.
Tensor Full(size_t i) {
  return *Tensor::Arange(kParams[i].shape, kParams[i].dtype, static_cast<int64_t>(1000 * i + 1));
}

// The layout the module is saved with: rows, columns (7 over 4: uneven), an enumerable spec
// holding two shards on rank 0 (NAME#K in its file); norm.weight and cols.view replicated.
specs::Plan SavePlan() {
  return *specs::ParsePlan(R"({"rules": [
      {"match": "embed.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
      {"match": "layers.*.proj.weight", "spec": {"type": "chunk", "dim": 1,
                                                 "placements": {"ranks": "all"}}},
      {"match": "head.weight", "spec": {"type": "enumerable", "shards": [
          {"offsets": [0, 0], "sizes": [3, 4], "placement": "rank:0"},
          {"offsets": [3, 0], "sizes": [3, 2], "placement": "rank:1"},
          {"offsets": [3, 2], "sizes": [3, 2], "placement": "rank:0"}]}}]})");
}

// Another layout, for any world: rows <-> columns, the enumerable one replicated, norm.weight
// enumerable over the first and last rank.
specs::Plan LoadPlan(int world) {
  return *specs::ParsePlan(absl::StrCat(R"({"rules": [
      {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
      {"match": "layers.*.proj.weight", "spec": {"type": "chunk", "dim": 0,
                                                 "placements": {"ranks": "all"}}},
      {"match": "norm.weight", "spec": {"type": "enumerable", "shards": [
          {"offsets": [0], "sizes": [1], "placement": "rank:0"},
          {"offsets": [1], "sizes": [3], "placement": "rank:)",
                                        world - 1, R"("}]}}]})"));
}

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

bool SameBytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = *a.Contiguous(), y = *b.Contiguous();
  return std::equal(x.data(), x.data() + x.nbytes(), y.data(), y.data() + y.nbytes());
}

// Every slot holds exactly this rank's part of the full tensors under `plan` (replicated: whole).
void ExpectLoaded(const Module& module, int rank) {
  for (size_t i = 0; i < std::size(kParams); ++i) {
    const char* name = kParams[i].name;
    if (!*module.IsSharded(name)) {
      EXPECT_TRUE(SameBytes(**module.GetTensor(name), Full(i))) << name << " on rank " << rank;
      continue;
    }
    const ShardedTensor& st = **module.GetSharded(name);
    EXPECT_EQ(st.global_shape(), kParams[i].shape) << name;
    for (const LocalShard& shard : st.local_shards()) {
      EXPECT_EQ(st.shards()[shard.index].placement.rank(), rank) << name;
      EXPECT_TRUE(SameBytes(shard.tensor, *NarrowToShard(Full(i), st.shards()[shard.index])))
          << name << " shard " << shard.index << " on rank " << rank;
    }
  }
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

// A module of meta tensors of the global shapes and dtypes (what a loading program starts from).
Module MetaModule() {
  Module module;
  for (const Param& p : kParams) {
    EXPECT_THAT(module.AddParameter(p.name, *Tensor::Meta(p.shape, p.dtype)), testing::IsOk());
  }
  return module;
}

// The module sharded by SavePlan from full tensors; cols.view a non-contiguous view.
Module ShardedModule(Communicator& comm) {
  Module module;
  for (size_t i = 0; i + 1 < std::size(kParams); ++i) {
    EXPECT_THAT(module.AddParameter(kParams[i].name, Full(i)), testing::IsOk());
  }
  const absl::Status sharded = ShardModule(module, SavePlan(), comm);
  EXPECT_THAT(sharded, testing::IsOk()) << sharded;
  // Columns [1, 4) of a [5, 6] tensor whose column j + 1 holds cols.view's column j (ShardModule
  // sends contiguous tensors only: the view joins after it).
  Tensor wide = *Tensor::Zeros({5, 6}, DType::kInt16);
  EXPECT_THAT((*wide.Narrow(1, 1, 3)).CopyFrom(Full(4)), testing::IsOk());
  Tensor view = *wide.Narrow(1, 1, 3);
  EXPECT_FALSE(view.IsContiguous());
  EXPECT_THAT(module.AddParameter("cols.view", view), testing::IsOk());
  return module;
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

// Every slot still holds its meta tensor: a failed load changed nothing.
void ExpectUnchanged(const Module& module) {
  for (const std::string& name : module.names()) {
    ASSERT_FALSE(*module.IsSharded(name)) << name;
    EXPECT_TRUE((*module.GetTensor(name))->is_meta()) << name;
  }
}

// A module or directory that does not match: the same error on every rank, nothing changed.
void LoadErrorsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  const specs::Plan plan = LoadPlan(comm.world_size());
  const auto expect_error = [&](Module& module, absl::StatusCode code, const std::string& text,
                                const std::string& dir_to_load) {
    EXPECT_THAT(LoadShards(dir_to_load, module, plan, comm),
                testing::StatusIs(code, HasSubstr(text)));
    ExpectUnchanged(module);
  };
  Module shape = MetaModule();
  ASSERT_THAT(shape.SetTensor("embed.weight", *Tensor::Meta({10, 7}, DType::kFloat32)),
              testing::IsOk());
  expect_error(shape, absl::StatusCode::kInvalidArgument,
               "\"embed.weight\" is F32[10, 7] in the module but F32[10, 6] in index.json", dir);
  Module dtype = MetaModule();
  ASSERT_THAT(dtype.SetTensor("layers.0.proj.weight", *Tensor::Meta({7, 5}, DType::kFloat32)),
              testing::IsOk());
  expect_error(dtype, absl::StatusCode::kInvalidArgument,
               "\"layers.0.proj.weight\" is F32[7, 5] in the module but I32[7, 5]", dir);
  Module extra = MetaModule();
  ASSERT_THAT(extra.AddParameter("extra.bias", *Tensor::Meta({3}, DType::kFloat32)),
              testing::IsOk());
  expect_error(extra, absl::StatusCode::kInvalidArgument,
               "\"extra.bias\" of the module is not in index.json", dir);
  Module fewer;
  for (size_t i = 0; i + 1 < std::size(kParams); ++i) {
    ASSERT_THAT(
        fewer.AddParameter(kParams[i].name, *Tensor::Meta(kParams[i].shape, kParams[i].dtype)),
        testing::IsOk());
  }
  expect_error(fewer, absl::StatusCode::kInvalidArgument,
               "\"cols.view\" of index.json is not in the module", dir);
  Module missing = MetaModule();
  expect_error(missing, absl::StatusCode::kNotFound, "-nonexistent: no such directory",
               dir + "-nonexistent");
  // One rank's module differs from the directory: every rank fails, naming that rank.
  Module one_off = MetaModule();
  if (rank == 1) {
    ASSERT_THAT(one_off.SetTensor("norm.weight", *Tensor::Meta({5}, DType::kFloat32)),
                testing::IsOk());
  }
  expect_error(one_off, absl::StatusCode::kInvalidArgument, "rank 1: parameter \"norm.weight\"",
               dir);
  Module budget = MetaModule();
  EXPECT_THAT(LoadShards(dir, budget, plan, comm, {.memory_bytes = -1}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("memory_bytes must be > 0, got -1")));
  ExpectUnchanged(budget);
  // A rank file cut short (in a copy): every rank fails opening it, nothing changes.
  const std::string cut = dir + "-cut";
  if (rank == 0) {
    fs::copy(dir, cut, fs::copy_options::recursive);
    const fs::path file = fs::path(cut) / RankFileName(1);
    fs::resize_file(file, fs::file_size(file) - 2);
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  Module truncated = MetaModule();
  EXPECT_THAT(LoadShards(cut, truncated, plan, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(RankFileName(1))));
  ExpectUnchanged(truncated);
  // allow_unused skips what the module does not hold.
  ASSERT_THAT(LoadShards(dir, fewer, plan, comm, {.allow_unused = true}), testing::IsOk());
  EXPECT_TRUE(*fewer.IsSharded("embed.weight"));
}

// SaveShards with `limited_rank`'s files limited to 16 bytes (RLIMIT_FSIZE; SIGXFSZ ignored, so
// that the write fails with EFBIG instead of killing the rank), restored afterwards.
absl::Status SaveWithSmallFileLimit(const std::string& dir, const Module& module,
                                    Communicator& comm, int limited_rank) {
  struct rlimit before {};
  ::getrlimit(RLIMIT_FSIZE, &before);
  void (*handler)(int) = SIG_DFL;
  if (comm.rank() == limited_rank) {
    handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = before;
    small.rlim_cur = 16;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  const absl::Status status = SaveShards(dir, module, comm);
  if (comm.rank() == limited_rank) {
    ::setrlimit(RLIMIT_FSIZE, &before);
    ::signal(SIGXFSZ, handler);
  }
  return status;
}

// SaveShards' errors: disagreeing ranks, a slot without data, foreign files, a rank failing before
// the commit — the same error everywhere and no index.json.
void SaveErrorsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string base(arg);
  Module module = ShardedModule(comm);
  const auto no_index = [](const std::string& dir) {
    return !fs::exists(fs::path(dir) / kIndexFileName);
  };
  Module disagree = ShardedModule(comm);
  if (rank == 1) {
    ASSERT_THAT(disagree.SetTensor("norm.weight", *Tensor::Arange({5}, DType::kFloat32)),
                testing::IsOk());
  }
  EXPECT_THAT(SaveShards(base + "/disagree", disagree, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::AllOf(HasSubstr("rank 1"), HasSubstr("norm.weight"))));
  EXPECT_TRUE(no_index(base + "/disagree"));
  EXPECT_THAT(SaveShards(base + "/budget", module, comm, {.memory_bytes = 0}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("memory_bytes must be > 0, got 0")));
  Module meta = MetaModule();
  EXPECT_THAT(SaveShards(base + "/meta", meta, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("parameter \"embed.weight\" has no data")));
  const std::string foreign = base + "/foreign";
  if (rank == 0) {
    fs::create_directories(foreign);
    std::ofstream(fs::path(foreign) / "notes.txt") << "mine\n";
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  EXPECT_THAT(SaveShards(foreign, module, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("notes.txt")));
  EXPECT_TRUE(no_index(foreign));
  // Another writer holds the directory's lock: every rank fails, naming it.
  const std::string locked = base + "/locked";
  std::optional<os::DirectoryLock> lock;
  if (rank == 0) {
    fs::create_directories(locked);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(lock, os::DirectoryLock::Acquire(locked));
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  EXPECT_THAT(SaveShards(locked, module, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(os::kLockFileName)));
  EXPECT_TRUE(no_index(locked));
  lock.reset();
  // A saved directory, then a save that rank 1 cannot write (its files may not grow beyond 16
  // bytes: EFBIG, a real write failure): every rank fails naming rank 1 and its file, and the
  // earlier output is still there, complete — it loads — with nothing left beside it.
  const std::string dir = base + "/late";
  ASSERT_THAT(SaveShards(dir, module, comm), testing::IsOk());
  EXPECT_FALSE(no_index(dir));
  const absl::Status late = SaveWithSmallFileLimit(dir, module, comm, /*limited_rank=*/1);
  EXPECT_THAT(late, testing::StatusIs(
                        absl::StatusCode::kUnavailable,
                        ::testing::AllOf(HasSubstr("shard files: rank 1"),
                                         HasSubstr(RankFileName(1)), HasSubstr("File too large"))));
  EXPECT_FALSE(no_index(dir));
  Module loaded = MetaModule();
  ASSERT_THAT(LoadShards(dir, loaded, SavePlan(), comm), testing::IsOk());
  ExpectLoaded(loaded, rank);
  std::vector<std::string> beside;
  for (const auto& entry : fs::directory_iterator(base)) {
    beside.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(beside, ::testing::Not(::testing::Contains(HasSubstr("shardkit-new"))));
  ASSERT_THAT(SaveShards(dir, module, comm), testing::IsOk());  // replaces the earlier output
  EXPECT_FALSE(no_index(dir));
}

TEST(SaveShards, Errors) {
  const std::string dir = testing::TestPath("errors");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group, testing::RankGroup::Shared(3, "gloo"));
  ASSERT_THAT(group->Run(&SaveErrorsCase, dir), testing::IsOk());
  EXPECT_THAT(group->Run(&LoadErrorsCase, dir + "/late"), testing::IsOk());
}

}  // namespace
}  // namespace shardkit::checkpoint
