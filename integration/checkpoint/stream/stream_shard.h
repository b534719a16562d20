// StreamShards: the data phase of `shardkit shard` — the rounds of a StreamSchedule, moved from
// the source's checkpoint into every rank's file under a fixed memory budget.
//
// Per round k (every rank, in step): one status round (a failed read or write anywhere stops
// every rank here, with one message), then one ScatterSegments from the source. The source fills
// its window with round k's blocks (TensorBytesReader: straight preads for long pieces, a small
// staging buffer for short ones) on a reader thread while round k-1 is sent, sends each rank its
// blocks (under kBroadcast: every block to every rank) straight from the window, and writes its
// own blocks to its file; a receiver receives into one of two reused buffers while a writer
// thread writes the other one's blocks at their final offsets (pwrite). Memory: the source holds
// two windows and the staging buffer; a receiver two buffers of its largest round share.
//
// Under direct every rank reads its own blocks from its own open checkpoint as the source reads
// the window (two buffers of its largest round share, and the staging buffer), and nothing is
// sent: the status rounds keep the ranks in step and failing together. Before reading a file in a
// round a rank checks that it is still the file it opened (same size, not replaced).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_SHARD_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_SHARD_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/os/files.h"
#include "integration/checkpoint/source/tensor_source.h"
#include "integration/checkpoint/stream/memory_budget.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/formats/output_file/output_writer.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

// Where this rank's blocks go: its file as the output format created it
// (formats::OutputWriter::CreateRankFile: everything but the tensors' bytes written) and the data
// offset of every shard it holds: dest[t][s] for shard s of schedule tensor t, dest[t][0] for a
// replicated one; -1 for blocks this rank receives but does not write (a replicated tensor that
// only the source writes, `--format dcp`).
using StreamOutput = formats::RankFile;

struct StreamOptions {
  int src_rank = 0;
  bool broadcast = false;     // every block to every rank (Strategy::kBroadcast)
  bool direct = false;        // every rank reads its own blocks (Strategy::kDirect)
  int64_t staging_bytes = 0;  // the source's staging buffer (> 0)
  CallOptions call;           // deadline of the whole phase
  // The source, when set: called after each round with the source bytes done so far.
  std::function<void(int64_t)> on_round;
};

struct StreamStats {
  int64_t bytes_read = 0;     // a reading rank: bytes it pread from the source, gaps included
  int64_t bytes_written = 0;  // bytes this rank wrote into its file
  int64_t buffer_bytes = 0;   // the memory this rank's windows and buffers took
};

// Collective. `source` is the open checkpoint (or shard directory) on the source rank (on every
// rank under direct), nullptr elsewhere; schedule tensors' source_index index its header().
// Errors: the first failure anywhere, the same on every rank (a read or write error: kUnavailable
// naming the file, kInvalidArgument if the checkpoint was truncated meanwhile; transport errors as
// the Communicator's, naming the round). `options.staging_bytes` must be > 0.
[[nodiscard]] absl::StatusOr<StreamStats> StreamShards(const StreamSchedule& schedule,
                                                       const TensorSource* source,
                                                       StreamOutput& output, Communicator& comm,
                                                       const StreamOptions& options);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_SHARD_H_
