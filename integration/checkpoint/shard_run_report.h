// ShardRunReport: what a run of ShardCheckpoint (shard_checkpoint.h) or ReshardCheckpoint
// (reshard_checkpoint.h) did, for its caller to show: the parameters, how the data moved, the
// time of each phase, and per rank its file, the bytes it read and wrote and its memory. The
// library fills it (ShardWriteOptions::report) and prints no summary; `shardkit shard` and
// `reshard` lay it out as their summary table (integration/report/run_summary.h).
//
//   ShardRunReport report;
//   options.write.report = &report;
//   SHARDKIT_RETURN_IF_ERROR(ShardCheckpoint(options, *comm, std::cerr));
//   if (comm->rank() == report.src_rank) std::cerr << cli::FormatShardSummary(report);
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_RUN_REPORT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_RUN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "integration/checkpoint/shard_index.h"

namespace shardkit::checkpoint {

// One rank of the run, as every rank reported it at the end (alike on every rank).
struct ShardRunRank {
  std::string file;           // its file in the output directory (rank-RRRRR.safetensors)
  int64_t tensors = 0;        // the shards and replicated tensors in that file
  int64_t bytes_read = 0;     // pread from the checkpoint, or from the old shard directory's files
  int64_t files_read = 0;     // reshard: the old rank files it read from (0 otherwise)
  int64_t bytes_written = 0;  // tensor bytes it wrote into its file
  int64_t peak_rss = 0;       // VmHWM at the end
  int64_t rss_growth = 0;     // VmHWM at the end minus VmHWM (reset) just before data moved
};

// The whole run, filled in on every rank once the output is complete (index.json written).
struct ShardRunReport {
  // How the data moved, as index.json says: kShardScatter / kShardBroadcast from `src_rank`,
  // kShardDirect (every rank read its own shards), or kReshard (ReshardCheckpoint: every rank
  // read its new shards from `in_dir` itself).
  WrittenBy written_by = WrittenBy::kShardScatter;
  int64_t src_rank = 0;             // the rank that read the checkpoint and wrote index.json
  int world_size = 0;               // the output's ranks
  std::string in_dir;               // reshard: the input directory, as given
  int64_t in_world_size = 0;        // reshard: its world size
  int64_t in_dcp_files = -1;        // reshard of a PyTorch DCP checkpoint: its data files,
  std::string in_files_kind;        // ".distcp files" or "safetensors files" (its HF writer's)
  int64_t parameters = 0;           // sharded + replicated
  int64_t sharded = 0;              // parameters with a spec
  int64_t replicated = 0;           // parameters every rank holds whole
  int64_t moved_bytes = 0;          // the tensor data the rounds moved (the checkpoint's, once)
  int64_t rounds = 0;               // rounds under the memory budget
  int64_t memory_bytes = 0;         // the memory budget per rank
  double plan_seconds = 0;          // from the start until the data moved: inputs, agreement, files
  double stream_seconds = 0;        // the rounds
  double total_seconds = 0;         // the whole run, index.json included
  std::vector<ShardRunRank> ranks;  // world_size entries, rank order

  bool reshard() const { return written_by == WrittenBy::kReshard; }
  // Every rank read its own bytes (direct, reshard): no tensor byte crossed the network.
  bool direct() const { return written_by == WrittenBy::kShardDirect || reshard(); }
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_RUN_REPORT_H_
