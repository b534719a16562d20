// The rank files of a shard directory: opened and checked against its index.json — what `gather`
// and `reshard` (ShardDirSource) and `inspect` read before any data — and the __metadata__ every
// rank file carries (RankFileMetadata).
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<safetensors::Reader> files, OpenRankFiles(dir, index));
//   SHARDKIT_ASSIGN_OR_RETURN(const safetensors::TensorInfo* at, FindShard(files, parameter, s));
//
// Writing one is ShardDirOutput::CreateRankFile (shard_dir_output.h).
#ifndef SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_RANK_FILES_H_
#define SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_RANK_FILES_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/os/files.h"
#include "core/tensor/shape.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/safetensors/sharding_info.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::shard_dir {

// Every rank file that holds a tensor carries safetensors::kDcpShardingInfoKey
// (formats/safetensors/sharding_info.h) for torch's HuggingFaceStorageReader (docs/checkpoints.md,
// "Loading a shard directory with torch"); index.json does not, and shardkit never reads it back
// from a shard directory: a checkpoint's own metadata is index.json's.
using safetensors::kDcpShardingInfoKey;

// A rank file's __metadata__: `metadata` (the checkpoint's: index.json's "metadata") with
// kDcpShardingInfoKey set to the JSON of `offsets` ({tensor name in the file: its offsets; a
// replicated tensor's are zeros}, every tensor of the file but the NAME#K ones, left out so that
// torch's HuggingFaceStorageReader refuses such a directory instead of loading part of the
// parameter: docs/checkpoints.md), replacing a key of that name in
// `metadata` (a checkpoint written by torch's HuggingFaceStorageWriter has one of its own). No
// tensors: `metadata` without that key (an empty rank file's header stays `{}`).
// Precondition: the names are valid UTF-8 (as safetensors::SerializeHeader needs them).
std::map<std::string, std::string> RankFileMetadata(std::map<std::string, std::string> metadata,
                                                    const std::map<std::string, Shape>& offsets);

// DIR/rank-00000.safetensors … for every rank of `index`, by rank, checked against it: each file
// is a well-formed safetensors file as long as its header says (safetensors::Reader::Open), and
// holds exactly the shards index.json lists on its rank (VerifyShards) — what gather, reshard and
// inspect read before anything else. Errors: kNotFound (a missing file or tensor),
// kInvalidArgument (a malformed file, a shard of another dtype or shape, an unlisted tensor),
// naming the file.
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

}  // namespace shardkit::shard_dir

#endif  // SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_RANK_FILES_H_
