// The one implementation behind ShardCheckpoint (shard_checkpoint.h) and ReshardCheckpoint
// (reshard_checkpoint.h): the steps of shard_checkpoint.h, reading a checkpoint or (`reshard`) an
// earlier shard directory. Not API: call those two.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_INTERNAL_WRITE_SHARD_DIRECTORY_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_INTERNAL_WRITE_SHARD_DIRECTORY_H_

#include <ostream>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "integration/checkpoint/shard_checkpoint.h"

namespace shardkit::checkpoint::internal {

// `reshard`: options.checkpoint_path is a shard directory that every rank reads its new shards
// from; strategy direct, src_rank 0, index.json says "reshard" (see ReshardCheckpoint).
[[nodiscard]] absl::Status WriteShardDirectory(const ShardCheckpointOptions& options, bool reshard,
                                               Communicator& comm, std::ostream& log);

}  // namespace shardkit::checkpoint::internal

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_INTERNAL_WRITE_SHARD_DIRECTORY_H_
