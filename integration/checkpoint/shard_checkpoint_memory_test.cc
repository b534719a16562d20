// ShardCheckpoint and GatherCheckpoint under a small memory budget, over real Gloo across forked
// ranks: a 96 MiB checkpoint (rows, columns, a replicated tensor, permuted placements) with 8 MiB,
// scattered, again with its tensors in reverse name order in the file, broadcast, and again read
// by every rank itself (direct); a 300 MiB single tensor with 16 MiB. The source (under direct,
// every rank) reads each checkpoint byte at most once. Every rank's VmHWM growth
// while the data moves stays under the budget + 24 MiB (not under sanitizers: their shadow memory
// and quarantine count), and the gathered file is byte-identical to the checkpoint. The reports
// both fill in (ShardRunReport, GatherReport) agree with the stats and the data's size.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/os/files.h"
#include "gtest/gtest.h"
#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/formats/safetensors/safetensors.h"
#include "nlohmann/json.hpp"
#include "specs/plan.h"
#include "testing/rank_group.h"
#include "testing/sanitizers.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

using Json = nlohmann::json;
constexpr int64_t kMiB = 1 << 20;

// A checkpoint whose data byte i is a pattern of i that no row or shard boundary repeats, written
// 1 MiB at a time (the test never holds a tensor). With `reversed`, the tensors lie in the file
// in reverse name order (safetensors does not require name order; shardkit's writers use it).
void WriteCheckpoint(const std::string& path, std::vector<safetensors::TensorInfo> tensors,
                     bool reversed = false) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(safetensors::FileLayout layout,
                                safetensors::PlanFile(path, std::move(tensors)));
  if (reversed) {
    uint64_t at = 0;
    for (auto it = layout.tensors.rbegin(); it != layout.tensors.rend(); ++it) {
      const uint64_t bytes = it->end - it->begin;
      it->begin = at;
      it->end = at += bytes;
    }
    layout.prefix = safetensors::SerializePrefix(layout.tensors, {});
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(os::AtomicFile file, os::AtomicFile::Create(path));
  ASSERT_THAT(file.Write(layout.prefix.data(), layout.prefix.size()), testing::IsOk());
  std::vector<unsigned char> chunk(kMiB);
  for (uint64_t at = 0; at < layout.data_size; at += chunk.size()) {
    const size_t n = std::min<uint64_t>(chunk.size(), layout.data_size - at);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t x = at + i;
      chunk[i] = static_cast<unsigned char>((x * 131) ^ (x >> 12) ^ (x >> 21));
    }
    ASSERT_THAT(file.Write(chunk.data(), n), testing::IsOk());
  }
  ASSERT_THAT(file.Commit(), testing::IsOk());
}

// The same tensors (names, dtypes, shapes, bytes) in both files, compared 1 MiB at a time.
absl::Status SameTensors(const std::string& a, const std::string& b) {
  SHARDKIT_ASSIGN_OR_RETURN(safetensors::Reader x, safetensors::Reader::Open(a));
  SHARDKIT_ASSIGN_OR_RETURN(safetensors::Reader y, safetensors::Reader::Open(b));
  if (x.header().tensors.size() != y.header().tensors.size()) {
    return absl::InternalError("different tensor counts");
  }
  std::vector<char> p(kMiB), q(kMiB);
  for (const safetensors::TensorInfo& info : x.header().tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(const safetensors::TensorInfo* other, y.Find(info.name));
    if (other->dtype != info.dtype || other->shape != info.shape) {
      return absl::InternalError(absl::StrCat(info.name, ": dtype or shape differs"));
    }
    for (uint64_t at = 0; at < info.end - info.begin; at += kMiB) {
      const uint64_t n = std::min<uint64_t>(kMiB, info.end - info.begin - at);
      SHARDKIT_RETURN_IF_ERROR(x.ReadBytes(info, at, n, p.data()));
      SHARDKIT_RETURN_IF_ERROR(y.ReadBytes(*other, at, n, q.data()));
      if (!std::equal(p.begin(), p.begin() + static_cast<ptrdiff_t>(n), q.begin())) {
        return absl::InternalError(absl::StrCat(info.name, ": bytes differ at ", at));
      }
    }
  }
  return absl::OkStatus();
}

// Every rank shards the checkpoint under the budget; rank 0 gathers it back under the same one.
void ShardUnderBudgetCase(int rank, Communicator& comm, std::string_view arg) {
  const Json c = Json::parse(arg);
  const int64_t budget = c["mib"].get<int64_t>() * kMiB;
  ShardCheckpointStats stats;
  ShardRunReport report;
  std::ostringstream log;
  ShardCheckpointOptions options{
      .checkpoint_path = c["checkpoint"],
      .strategy = *specs::ParseStrategy(c["strategy"].get<std::string>()),
      .write = {.plan_path = c["plan"],
                .out_dir = c["out"],
                .memory_bytes = budget,
                .stats = &stats,
                .report = &report}};
  ASSERT_THAT(ShardCheckpoint(options, comm, log), testing::IsOk()) << log.str();
  // Every rank's report holds every rank's row; this rank's is its stats.
  ASSERT_EQ(report.ranks.size(), static_cast<size_t>(comm.world_size()));
  const ShardRunRank& mine = report.ranks[static_cast<size_t>(rank)];
  EXPECT_EQ(mine.bytes_written, stats.bytes_written);
  EXPECT_EQ(mine.bytes_read, stats.bytes_read);
  EXPECT_EQ(mine.file, RankFileName(rank));
  EXPECT_EQ(report.rounds, stats.rounds);
  EXPECT_EQ(report.memory_bytes, budget);
  EXPECT_EQ(report.parameters, report.sharded + report.replicated);
  EXPECT_EQ(report.moved_bytes, c["data_bytes"].get<int64_t>());
  EXPECT_EQ(report.written_by, WrittenByShard(*options.strategy));
  EXPECT_GT(stats.rounds, c["min_rounds"].get<int64_t>()) << "the budget cuts the data in rounds";
  EXPECT_LE(stats.buffer_bytes, budget) << "rank " << rank;
  const int64_t data = c["data_bytes"].get<int64_t>();
  if (c["strategy"] == "direct") {  // every rank reads what it writes, each byte at most once
    EXPECT_GE(stats.bytes_read, stats.bytes_written) << "rank " << rank;
    EXPECT_LE(stats.bytes_read, data + data / 100) << "rank " << rank << ": read amplification";
  } else if (rank == 0) {  // the source reads every byte of the checkpoint once
    EXPECT_GE(stats.bytes_read, data);
    EXPECT_LE(stats.bytes_read, data + data / 100) << "read amplification";
  }
  std::cerr << "rank " << rank << ": " << stats.rounds << " rounds, buffers "
            << stats.buffer_bytes / kMiB << " MiB, read " << stats.bytes_read << " B, VmHWM growth "
            << static_cast<double>(stats.rss_growth) / kMiB << " MiB (bound "
            << (budget + 24 * kMiB) / kMiB << ")\n";
  if (!testing::kSanitized) {
    EXPECT_LT(stats.rss_growth, budget + 24 * kMiB)
        << "rank " << rank << ": VmHWM grew by " << stats.rss_growth << " bytes";
  }
  absl::Status gathered;
  if (rank == 0) {
    std::ostringstream gather_log;
    GatherReport written;
    gathered = GatherCheckpoint(c["out"], c["gathered"], gather_log,
                                {.memory_bytes = budget, .report = &written});
    if (gathered.ok()) gathered = SameTensors(c["checkpoint"], c["gathered"]);
    EXPECT_EQ(written.bytes, c["data_bytes"].get<int64_t>());
    EXPECT_EQ(written.parameters, report.parameters);
    EXPECT_EQ(written.rank_files, comm.world_size());
    EXPECT_EQ(written.files, std::vector<std::string>{c["gathered"].get<std::string>()});
    EXPECT_TRUE(written.index_path.empty());
  }
  EXPECT_THAT(AgreeOnStatus(comm, gathered, "gather"), testing::IsOk());
}

std::string WritePlan(const std::string& name, const std::string& text) {
  const std::string path = testing::TestPath(name);
  EXPECT_THAT(os::WriteFileAtomically(path, text), testing::IsOk());
  return path;
}

// 96 MiB: rows, columns, a replicated tensor, permuted placements; under 8 MiB.
void RunMixed(const std::string& name, bool reversed, const std::string& strategy) {
  const std::string ck = testing::TestPath(name + ".safetensors");
  WriteCheckpoint(ck,
                  {{"a.weight", DType::kFloat32, {2048, 4096}, 0, 0},
                   {"b.weight", DType::kFloat32, {4096, 2048}, 0, 0},
                   {"c.bias", DType::kBFloat16, {8, 1 << 20}, 0, 0},
                   {"d.weight", DType::kFloat16, {1024, 8192}, 0, 0}},
                  reversed);
  const std::string plan = WritePlan(name + ".json", R"({"rules": [
      {"match": "a.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
      {"match": "b.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
      {"match": "d.weight", "spec": {"type": "chunk", "dim": 1,
                                     "placements": ["rank:2", "rank:0", "rank:1"]}}]})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group, testing::RankGroup::Shared(3, "gloo"));
  const Json c = {{"plan", plan},
                  {"checkpoint", ck},
                  {"out", testing::TestPath(name + "-out")},
                  {"gathered", testing::TestPath(name + "-back.safetensors")},
                  {"strategy", strategy},
                  {"mib", 8},
                  {"min_rounds", 20},
                  {"data_bytes", 96 * kMiB}};
  EXPECT_THAT(group->Run(&ShardUnderBudgetCase, c.dump()), testing::IsOk()) << name;
}

TEST(ShardCheckpointMemory, MixedCheckpointUnderEightMiB) { RunMixed("mixed", false, "scatter"); }

// The file's tensors in reverse name order (rounds follow the file, rank files the names), and
// every window broadcast whole to every rank.
TEST(ShardCheckpointMemory, ReversedFileOrderBroadcastUnderEightMiB) {
  RunMixed("reversed", true, "broadcast");
}

// Every rank reading its own shards itself (columns staged: each rank reads those tensors whole).
TEST(ShardCheckpointMemory, DirectUnderEightMiB) { RunMixed("direct", false, "direct"); }

TEST(ShardCheckpointMemory, OneTensorLargerThanTheBudget) {
  const std::string ck = testing::TestPath("one.safetensors");
  WriteCheckpoint(ck, {{"big", DType::kFloat32, {300, 262144}, 0, 0}});
  const std::string plan = WritePlan("one.json", R"({"rules": [
      {"match": "big", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group, testing::RankGroup::Shared(3, "gloo"));
  const Json c = {{"plan", plan},
                  {"checkpoint", ck},
                  {"out", testing::TestPath("one-out")},
                  {"gathered", testing::TestPath("one-back.safetensors")},
                  {"strategy", "scatter"},
                  {"mib", 16},
                  {"min_rounds", 30},
                  {"data_bytes", 300 * kMiB}};
  EXPECT_THAT(group->Run(&ShardUnderBudgetCase, c.dump()), testing::IsOk());
}

}  // namespace
}  // namespace shardkit::checkpoint
