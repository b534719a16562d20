#include "integration/checkpoint/reshard_checkpoint.h"

#include "integration/checkpoint/internal/write_shard_directory.h"

namespace shardkit::checkpoint {

absl::Status ReshardCheckpoint(const ReshardCheckpointOptions& options, Communicator& comm,
                               std::ostream& log) {
  ShardCheckpointOptions shard{
      .plan_path = options.plan_path,
      .checkpoint_path = options.in_dir,
      .out_dir = options.out_dir,
      .progress = options.progress,
      .memory_bytes = options.memory_bytes,
      .fp8 = options.fp8,
      .strict = options.strict,
      .call = options.call,
      .stats = options.stats,
  };
  return internal::WriteShardDirectory(shard, /*reshard=*/true, comm, log);
}

}  // namespace shardkit::checkpoint
