// The rank files of a shard directory, opened and checked against its index.json — what `gather`
// and `reshard` (ShardDirSource) read before any data.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<safetensors::Reader> files, OpenRankFiles(dir, index));
//   SHARDKIT_RETURN_IF_ERROR(VerifyShards(files, index));
//   SHARDKIT_ASSIGN_OR_RETURN(const safetensors::TensorInfo* at, FindShard(files, parameter, s));
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_RANK_FILES_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_RANK_FILES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/shard_dir.h"
#include "integration/safetensors/safetensors.h"

namespace shardkit::checkpoint {

// DIR/rank-00000.safetensors … for every rank of `index`, by rank.
// Errors: kNotFound (a missing file), kInvalidArgument (a malformed one), naming the file.
[[nodiscard]] absl::StatusOr<std::vector<safetensors::Reader>> OpenRankFiles(
    const std::string& dir, const ShardIndex& index);

// Shard `s` of `parameter` in its rank's file, with the dtype and shape index.json gives it.
// Errors: kNotFound (no such tensor), kInvalidArgument (another dtype or shape), naming both.
[[nodiscard]] absl::StatusOr<const safetensors::TensorInfo*> FindShard(
    const std::vector<safetensors::Reader>& files, const IndexParameter& parameter, size_t s);

// Every listed shard is present with its dtype and shape (FindShard), and no file holds a tensor
// index.json does not list. Errors: as FindShard; kInvalidArgument naming the unlisted tensor.
[[nodiscard]] absl::Status VerifyShards(const std::vector<safetensors::Reader>& files,
                                        const ShardIndex& index);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_RANK_FILES_H_
