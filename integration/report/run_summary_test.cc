// FormatShardSummary and FormatGatherSummary on reports built by hand: the exact text `shard`,
// `reshard` and `gather` print (the end-to-end tests in integration/tests check it on real runs).
#include "integration/report/run_summary.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace shardkit::report {
namespace {

using checkpoint::GatherReport;
using checkpoint::ShardRunRank;
using checkpoint::ShardRunReport;
using checkpoint::WrittenBy;

constexpr int64_t kMiB = 1 << 20;

// Two ranks, 3 MiB moved in 2 rounds in 1.5 s (2 MiB/s).
ShardRunReport TwoRanks(WrittenBy written_by) {
  return {.written_by = written_by,
          .src_rank = 1,
          .world_size = 2,
          .parameters = 3,
          .sharded = 2,
          .replicated = 1,
          .moved_bytes = 3 * kMiB,
          .rounds = 2,
          .memory_bytes = 512 * kMiB,
          .plan_seconds = 0.25,
          .stream_seconds = 1.5,
          .total_seconds = 2,
          .ranks = {{.file = "rank-00000.safetensors",
                     .tensors = 3,
                     .bytes_read = 1600000,
                     .files_read = 2,
                     .bytes_written = 3 * kMiB / 2,
                     .peak_rss = 10 * kMiB,
                     .rss_growth = 3 * kMiB / 2},
                    {.file = "rank-00001.safetensors",
                     .tensors = 2,
                     .bytes_read = 1100000,
                     .files_read = 1,
                     .bytes_written = kMiB,
                     .peak_rss = 9 * kMiB}}};
}

TEST(FormatShardSummaryTest, ScatterFromTheSourceRank) {
  EXPECT_EQ(FormatShardSummary(TwoRanks(WrittenBy::kShardScatter)),
            "shardkit shard: 3 parameters (2 sharded, 1 replicated) on 2 ranks, scatter from rank "
            "1\n"
            "  planned in 0.250 s; streamed 3.0 MiB in 2 rounds in 1.500 s (2.0 MiB/s), memory "
            "budget 512 MiB per rank, total 2.000 s\n"
            "  rank  file                    tensors         bytes   peak_rss_mib   "
            "rss_growth_mib\n"
            "  0     rank-00000.safetensors        3       1572864           10.0              "
            "1.5\n"
            "  1     rank-00001.safetensors        2       1048576            9.0              "
            "0.0\n");
}

TEST(FormatShardSummaryTest, DirectAndBroadcastSayHowTheDataMoved) {
  const std::string direct = FormatShardSummary(TwoRanks(WrittenBy::kShardDirect));
  EXPECT_NE(direct.find("on 2 ranks, direct: every rank read its own shards\n"
                        "  planned in 0.250 s; read 3.0 MiB in 2 rounds"),
            std::string::npos)
      << direct;
  const std::string broadcast = FormatShardSummary(TwoRanks(WrittenBy::kShardBroadcast));
  EXPECT_NE(broadcast.find("on 2 ranks, broadcast from rank 1\n  planned in 0.250 s; streamed"),
            std::string::npos)
      << broadcast;
}

// A reshard names the old directory and its world, and its rows add bytes_read and old_files.
TEST(FormatShardSummaryTest, ReshardAddsWhatEachRankRead) {
  ShardRunReport report = TwoRanks(WrittenBy::kReshard);
  report.src_rank = 0;
  report.in_dir = "old";
  report.in_world_size = 4;
  EXPECT_EQ(FormatShardSummary(report),
            "shardkit reshard: 3 parameters (2 sharded, 1 replicated) on 2 ranks, from old (4 "
            "ranks): every rank read its new shards itself\n"
            "  planned in 0.250 s; read 3.0 MiB in 2 rounds in 1.500 s (2.0 MiB/s), memory budget "
            "512 MiB per rank, total 2.000 s\n"
            "  rank  file                    tensors    bytes_read  old_files         bytes   "
            "peak_rss_mib   rss_growth_mib\n"
            "  0     rank-00000.safetensors        3       1600000          2       1572864        "
            "   10.0              1.5\n"
            "  1     rank-00001.safetensors        2       1100000          1       1048576        "
            "    9.0              0.0\n");
}

// No time measured: the rate is "-", not a division by zero.
TEST(FormatShardSummaryTest, NoTimeGivesNoRate) {
  ShardRunReport report = TwoRanks(WrittenBy::kShardScatter);
  report.stream_seconds = 0;
  const std::string text = FormatShardSummary(report);
  EXPECT_NE(text.find("in 2 rounds in 0.000 s (-), memory"), std::string::npos) << text;
}

GatherReport Gathered() {
  return {.parameters = 7,
          .bytes = 3 * kMiB,
          .rank_files = 2,
          .out = "out.safetensors",
          .files = {"out.safetensors"},
          .seconds = 1.5,
          .peak_rss = 12 * kMiB};
}

TEST(FormatGatherSummaryTest, OneFileIsNamed) {
  EXPECT_EQ(FormatGatherSummary(Gathered()),
            "shardkit gather: 7 parameters (3.0 MiB) from 2 rank files to out.safetensors in "
            "1.500 s (2.0 MiB/s), peak RSS 12.0 MiB\n");
}

// A Hugging Face output of several files names its directory, the count and the index; of one
// file, that file.
TEST(FormatGatherSummaryTest, HuggingFaceOutputNamesItsFilesAndIndex) {
  GatherReport report = Gathered();
  report.out = "hf";
  report.files = {"hf/model-00001-of-00002.safetensors", "hf/model-00002-of-00002.safetensors"};
  report.index_path = "hf/model.safetensors.index.json";
  EXPECT_EQ(FormatGatherSummary(report),
            "shardkit gather: 7 parameters (3.0 MiB) from 2 rank files to hf (2 files and "
            "model.safetensors.index.json) in 1.500 s (2.0 MiB/s), peak RSS 12.0 MiB\n");
  report.files = {"hf/model.safetensors"};
  report.index_path.clear();
  EXPECT_EQ(FormatGatherSummary(report),
            "shardkit gather: 7 parameters (3.0 MiB) from 2 rank files to hf/model.safetensors in "
            "1.500 s (2.0 MiB/s), peak RSS 12.0 MiB\n");
}

}  // namespace
}  // namespace shardkit::report
