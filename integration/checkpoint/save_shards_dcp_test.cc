// SaveShards and LoadShards with PyTorch DCP checkpoints (SaveShardsOptions::format kDcp), over
// real Gloo across forked ranks, with real files: a module sharded over 3 ranks (rows, uneven
// columns, an enumerable spec with two shards on one rank, a replicated parameter) saved as DCP —
// `.metadata` and one `__R_0.distcp` per rank, the replicated parameter once, no index.json — is
// loaded back at 3 ranks with another plan and at 2 ranks (LoadShards reads DCP); `gather` of it
// gives every full tensor. Ranks given different formats fail together, nothing written. (torch
// itself reads such output in integration/tests/dcp_torch_test.py, through the CLI's writers,
// which are the same code.)
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/comm/collective_status.h"
#include "core/engine/shard_parameter.h"
#include "core/engine/sharded_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/save_shards.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/safetensors/safetensors.h"
#include "specs/plan.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Param {
  const char* name;
  Shape shape;
  DType dtype;
};
const Param kParams[] = {{"embed.weight", {10, 6}, DType::kFloat32},
                         {"proj.weight", {7, 5}, DType::kBFloat16},
                         {"moe.weight", {8, 3}, DType::kInt64},
                         {"norm.weight", {4}, DType::kFloat32}};

Tensor Full(size_t i) {
  return *Tensor::Arange(kParams[i].shape, kParams[i].dtype, static_cast<int64_t>(100 * i + 1));
}

specs::Plan Plan(const std::string& rules) {
  return *specs::ParsePlan(absl::StrCat(R"({"rules": [)", rules, "]}"));
}

// Rows, columns (7 over 3: uneven), two shards of moe.weight on rank 0 and one on rank 2,
// norm.weight replicated.
specs::Plan SavePlan() {
  return Plan(
      R"({"match": "embed.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
                 {"match": "proj.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
                 {"match": "moe.weight", "spec": {"type": "enumerable", "shards": [
                   {"offsets": [0, 0], "sizes": [3, 3], "placement": "rank:0"},
                   {"offsets": [3, 0], "sizes": [3, 3], "placement": "rank:0"},
                   {"offsets": [6, 0], "sizes": [2, 3], "placement": "rank:2"}]}})");
}

// The other way round; norm.weight sharded.
specs::Plan LoadPlan() {
  return Plan(
      R"({"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
                 {"match": "proj.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
                 {"match": "norm.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}})");
}

Module MetaModule() {
  Module module;
  for (const Param& p : kParams)
    EXPECT_THAT(module.AddParameter(p.name, *Tensor::Meta(p.shape, p.dtype)), testing::IsOk());
  return module;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = *a.Contiguous(), y = *b.Contiguous();
  return std::equal(x.data(), x.data() + x.nbytes(), y.data(), y.data() + y.nbytes());
}

// Every slot holds exactly this rank's part of the full tensors (replicated: whole).
void ExpectLoaded(const Module& module) {
  for (size_t i = 0; i < std::size(kParams); ++i) {
    const std::string name = kParams[i].name;
    if (!*module.IsSharded(name)) {
      EXPECT_TRUE(SameBytes(**module.GetTensor(name), Full(i))) << name;
      continue;
    }
    const ShardedTensor& sharded = **module.GetSharded(name);
    for (const LocalShard& shard : sharded.local_shards()) {
      EXPECT_TRUE(SameBytes(shard.tensor, *NarrowToShard(Full(i), sharded.shards()[shard.index])))
          << name << " shard " << shard.index;
    }
  }
}

void SaveCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  Module module;
  for (size_t i = 0; i < std::size(kParams); ++i) {
    ASSERT_THAT(module.AddParameter(kParams[i].name, Full(i)), testing::IsOk());
  }
  ASSERT_THAT(ShardModule(module, SavePlan(), comm), testing::IsOk());
  ASSERT_THAT(SaveShards(dir, module, comm, {.format = OutputFormat::kDcp}), testing::IsOk());
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    // Rank 0's lock goes as it returns, perhaps after this rank looks.
    if (entry.path().filename() != ".shardkit.lock") names.push_back(entry.path().filename());
  }
  std::sort(names.begin(), names.end());
  // .shardkit-output marks the checkpoint as shardkit's own (OutputDirectory): a later save may
  // replace it, where one that torch wrote is refused.
  EXPECT_THAT(names, ElementsAre(".metadata", ".shardkit-output", "__0_0.distcp", "__1_0.distcp",
                                 "__2_0.distcp"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const dcp::Metadata metadata, dcp::ReadMetadata(dir));
  ASSERT_EQ(metadata.tensors.size(), std::size(kParams));
  for (const dcp::TensorEntry& tensor : metadata.tensors) {
    if (tensor.fqn == "norm.weight") {  // once, by rank 0
      ASSERT_EQ(tensor.chunks.size(), 1u);
      EXPECT_EQ(tensor.chunks[0].item.file, "__0_0.distcp");
    }
    if (tensor.fqn == "moe.weight") {  // two chunks of rank 0's file, one of rank 2's
      ASSERT_EQ(tensor.chunks.size(), 3u);
      EXPECT_EQ(tensor.chunks[0].item.file, "__0_0.distcp");
      EXPECT_EQ(tensor.chunks[1].item.file, "__0_0.distcp");
      EXPECT_EQ(tensor.chunks[2].item.file, "__2_0.distcp");
    }
  }
  Module loaded = MetaModule();
  ASSERT_THAT(LoadShards(dir, loaded, LoadPlan(), comm), testing::IsOk());
  ExpectLoaded(loaded);
  EXPECT_TRUE(*loaded.IsSharded("norm.weight"));
  if (rank != 0) return;
  std::ostringstream log;
  const std::string out = dir + "-gathered.safetensors";
  ASSERT_THAT(GatherCheckpoint(dir, out, log), testing::IsOk()) << log.str();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(safetensors::Reader reader, safetensors::Reader::Open(out));
  for (size_t i = 0; i < std::size(kParams); ++i) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor tensor, reader.ReadTensor(kParams[i].name));
    EXPECT_TRUE(SameBytes(tensor, Full(i))) << kParams[i].name;
  }
}

void LoadCase(int rank, Communicator& comm, std::string_view arg) {
  Module loaded = MetaModule();
  ASSERT_THAT(LoadShards(std::string(arg), loaded, LoadPlan(), comm), testing::IsOk());
  ExpectLoaded(loaded);
}

// Rank 1 is given the other format: every rank fails with the same message, nothing written.
void MixedFormatsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  Module module;
  ASSERT_THAT(module.AddParameter("w", Full(0)), testing::IsOk());
  const OutputFormat format = rank == 1 ? OutputFormat::kShardkit : OutputFormat::kDcp;
  EXPECT_THAT(SaveShards(dir, module, comm, {.format = format}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("the ranks were given different formats: dcp on ranks "
                                          "0, 2, shardkit on ranks 1")));
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".metadata"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "index.json"));
}

// Non-tensor items (SaveShardsOptions::items) go into rank 0's file once, listed in .metadata as
// torch lists them, and come back as bytes (LoadShardsOptions::items). A format without a place
// for them, or an item named like a parameter, is refused; so is a DCP checkpoint torch wrote at
// DIR (no .shardkit-output), left as it was.
void ItemsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  Module module;
  for (size_t i = 0; i < std::size(kParams); ++i) {
    ASSERT_THAT(module.AddParameter(kParams[i].name, Full(i)), testing::IsOk());
  }
  ASSERT_THAT(ShardModule(module, SavePlan(), comm), testing::IsOk());
  // Opaque bytes (torch.save archives in real use; rank 0's are the ones written).
  const std::map<std::string, std::string> items = {
      {"optimizer.param_groups.0.lr", std::string("lr\0bytes", 8)},
      {"train_state.step", absl::StrCat("step of rank ", rank == 0 ? 0 : 9)}};
  ASSERT_THAT(SaveShards(dir, module, comm, {.format = OutputFormat::kDcp, .items = items}),
              testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const dcp::Metadata metadata, dcp::ReadMetadata(dir));
  ASSERT_EQ(metadata.bytes.size(), 2u);
  for (const dcp::BytesEntry& entry : metadata.bytes) {
    EXPECT_EQ(entry.item.file, "__0_0.distcp") << entry.fqn;
  }
  Module loaded = MetaModule();
  std::map<std::string, std::string> read;
  ASSERT_THAT(LoadShards(dir, loaded, LoadPlan(), comm, {.items = &read}), testing::IsOk());
  EXPECT_EQ(read, (std::map<std::string, std::string>{
                      {"optimizer.param_groups.0.lr", std::string("lr\0bytes", 8)},
                      {"train_state.step", "step of rank 0"}}));
  ExpectLoaded(loaded);
  EXPECT_THAT(SaveShards(dir + "-shardkit", module, comm, {.items = items}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("a shard directory has no place for non-tensor items")));
  EXPECT_THAT(SaveShards(dir, module, comm,
                         {.format = OutputFormat::kDcp, .items = {{"norm.weight", "x"}}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("\"norm.weight\" is also a parameter of the module")));
  const std::string torch_dir = dir + "-torch";
  if (rank == 0) {
    fs::create_directories(torch_dir);
    for (const char* name : {".metadata", "__0_0.distcp", "__1_0.distcp"}) {
      std::ofstream(fs::path(torch_dir) / name) << "torch's";
    }
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  EXPECT_THAT(SaveShards(torch_dir, module, comm, {.format = OutputFormat::kDcp}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("holds a PyTorch DCP checkpoint that shardkit did not "
                                          "write")));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(torch_dir)) {
    names.push_back(entry.path().filename());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre(".metadata", "__0_0.distcp", "__1_0.distcp"));
}

TEST(SaveShardsDcp, NonTensorItemsAndAForeignCheckpoint) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * three, testing::RankGroup::Shared(3, "gloo"));
  EXPECT_THAT(three->Run(&ItemsCase, testing::TestPath("items")), testing::IsOk());
}

TEST(SaveShardsDcp, SaveAtThreeLoadAtThreeAndTwo) {
  const std::string dir = testing::TestPath("dcp3");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * three, testing::RankGroup::Shared(3, "gloo"));
  ASSERT_THAT(three->Run(&SaveCase, dir), testing::IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * two, testing::RankGroup::Shared(2, "gloo"));
  EXPECT_THAT(two->Run(&LoadCase, dir), testing::IsOk());
}

TEST(SaveShardsDcp, RanksGivenDifferentFormatsFailTogether) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * three, testing::RankGroup::Shared(3, "gloo"));
  EXPECT_THAT(three->Run(&MixedFormatsCase, testing::TestPath("mixed")), testing::IsOk());
}

}  // namespace
}  // namespace shardkit::checkpoint
