#include "integration/checkpoint/reshard_checkpoint.h"

#include "integration/checkpoint/internal/write_shard_directory.h"

namespace shardkit::checkpoint {

absl::Status ReshardCheckpoint(const ReshardCheckpointOptions& options, Communicator& comm,
                               std::ostream& log) {
  return internal::WriteShardDirectory({.checkpoint_path = options.in_dir, .write = options.write},
                                       /*reshard=*/true, comm, log);
}

}  // namespace shardkit::checkpoint
