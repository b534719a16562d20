// ReshardCheckpoint: `shardkit reshard` as a library — an earlier shard directory (one that
// `shardkit shard`, `reshard` or SaveShards wrote) laid out anew for another plan or world size,
// into a new shard directory.
//
//   ReshardCheckpointOptions options{
//       .in_dir = "shards", .write = {.plan_path = "plan.json", .out_dir = "shards-tp2"}};
//   SHARDKIT_RETURN_IF_ERROR(ReshardCheckpoint(options, *comm, std::cerr));
//
// The steps are ShardCheckpoint's (shard_checkpoint.h) with these differences: every rank opens
// `in_dir` (at the same path) and reads its new shards from the old rank files itself (strategy
// direct from source rank 0: a plan's src_rank and strategy are ignored, with a warning; no
// tensor byte crosses the network); the plan is bound to the old directory's parameters and this
// world; index.json says "reshard". `write.out_dir` must lie outside `in_dir`.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_RESHARD_CHECKPOINT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_RESHARD_CHECKPOINT_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "integration/checkpoint/gather_checkpoint.h"  // GatherToDcp, declared here before
#include "integration/checkpoint/shard_checkpoint.h"

namespace shardkit::checkpoint {

struct ReshardCheckpointOptions {
  std::string in_dir;  // the earlier shard directory, read by every rank
  // As for ShardCheckpoint; `fp8` is checked on the new layouts, progress is rank 0's.
  ShardWriteOptions write;
};

// Collective over `comm`. Errors: as ShardCheckpoint, the input being a shard directory
// (kInvalidArgument / kNotFound for a missing or malformed one, or an out_dir inside it).
[[nodiscard]] absl::Status ReshardCheckpoint(const ReshardCheckpointOptions& options,
                                             Communicator& comm, std::ostream& log);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_RESHARD_CHECKPOINT_H_
