// StreamSchedule: how `shardkit shard` moves a checkpoint in rounds under a memory budget —
// computed identically on every rank from the agreed plan, so that no round needs more than its
// small agreement header to be understood.
//
// The source's data region is cut into rounds of at most `window` bytes: round k covers bytes
// [k * window, (k + 1) * window). Every byte of a sharded tensor belongs to exactly one shard
// (the layout tiles the tensor), and every byte of a replicated tensor goes to every rank, so a
// round's bytes fit one window exactly. Within a round the window holds *blocks*: the bytes of
// one shard that lie in the round (a contiguous range of the shard's own bytes however many rows
// they cut: core/tensor/byte_runs.h), or the round's part of a replicated tensor (one block for all
// ranks). Blocks are laid out replicated first, then rank by rank, so a rank's blocks are one run
// of window bytes per tensor: the source sends them as they are, and the receiver writes each at
// its final offset in its rank file (pieces may be smaller than a row; files are written in place).
//
//   StreamSchedule schedule(tensors, world, window);
//   for (int64_t k = 0; k < schedule.rounds(); ++k) {
//     const Round round = schedule.MakeRound(k);
//     round.ForEachBlockOf(r, [&](const Block& block) { ... });  // rank r's, in window order
//   }
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_SCHEDULE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/byte_runs.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "integration/formats/output_file/output_writer.h"
#include "specs/shard_metadata.h"

namespace shardkit::checkpoint {

// One tensor of the checkpoint with its agreed layout (formats::OutputTensor: name, dtype, shape,
// replicated, shards, spec_json) and where its bytes are.
struct StreamTensor : formats::OutputTensor {
  uint64_t begin = 0;  // its bytes in the source's data region
  uint64_t end = 0;
  size_t source_index = 0;     // its index in the source file's header
  std::vector<ByteRuns> runs;  // sharded: one per shard
};

// Builds a StreamTensor (runs computed). `shards` is the layout; ignored when replicated.
// Errors: kInvalidArgument naming the tensor and shard when a sub-byte tensor's shard does not
// start and end on byte boundaries (RunsOf).
[[nodiscard]] absl::StatusOr<StreamTensor> MakeStreamTensor(
    std::string name, DType dtype, Shape shape, uint64_t begin, uint64_t end, bool replicated,
    std::vector<specs::ShardMetadata> shards);

struct Block {
  size_t tensor = 0;   // index into the schedule's tensors
  int64_t shard = -1;  // index into its shards; -1: a replicated tensor's bytes, for every rank
  int64_t window_offset = 0;
  int64_t first = 0;  // first byte of the block in the shard's own bytes (replicated: tensor's)
  int64_t bytes = 0;
};

// A round's window holds its blocks back to back: first the replicated ones (every rank's), then
// each rank's own, rank by rank — so rank r receives at most two ranges of the window.
struct Round {
  uint64_t begin = 0;  // source data-region bytes [begin, end)
  uint64_t end = 0;
  std::vector<Block> blocks;  // in window order, back to back
  size_t shared = 0;          // blocks[0, shared) go to every rank
  int64_t shared_bytes = 0;
  // Per rank: its own blocks are blocks[own[r].first, own[r].second).
  std::vector<std::pair<size_t, size_t>> own;

  // The bytes rank r receives: the shared blocks and its own.
  int64_t RankBytes(int rank) const;
  // fn(block) for every block of rank r, in window order.
  template <typename Fn>
  void ForEachBlockOf(int rank, Fn fn) const {
    for (size_t b = 0; b < shared; ++b) fn(blocks[b]);
    const auto [first, last] = own[static_cast<size_t>(rank)];
    for (size_t b = first; b < last; ++b) fn(blocks[b]);
  }
};

class StreamSchedule {
 public:
  // `tensors` in any order (sorted here by begin); `window` > 0 bytes per round.
  StreamSchedule(std::vector<StreamTensor> tensors, int world_size, int64_t window);

  const std::vector<StreamTensor>& tensors() const { return tensors_; }
  int64_t rounds() const { return rounds_; }
  int64_t window() const { return window_; }
  int64_t total_bytes() const { return total_; }
  Round MakeRound(int64_t k) const;
  // The most bytes `rank` receives in one round.
  int64_t MaxRankBytes(int rank) const;

 private:
  std::vector<StreamTensor> tensors_;  // by begin
  int world_;
  int64_t window_;
  int64_t total_ = 0;
  int64_t rounds_ = 0;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_SCHEDULE_H_
