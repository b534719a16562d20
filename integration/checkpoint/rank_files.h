// The rank files of a shard directory: opened and checked against its index.json — what `gather`
// and `reshard` (ShardDirSource) read before any data — and created, by the writers of a shard
// directory (`shard`, `reshard`: ShardCheckpoint; SaveShards).
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<safetensors::Reader> files, OpenRankFiles(dir, index));
//   SHARDKIT_ASSIGN_OR_RETURN(const safetensors::TensorInfo* at, FindShard(files, parameter, s));
//
//   std::optional<io::AtomicFile> file;
//   StreamOutput output;
//   SHARDKIT_RETURN_IF_ERROR(CreateRankFile(dir, rank, tensors, metadata, file, output));
//   // ... file->WriteAt(output.data_start + output.dest[t][s] + k, ...) ...; file->Commit()
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_RANK_FILES_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_RANK_FILES_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/shard_dir.h"
#include "integration/checkpoint/stream_schedule.h"
#include "integration/checkpoint/stream_shard.h"
#include "core/os/files.h"
#include "integration/safetensors/safetensors.h"

namespace shardkit::checkpoint {

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

// Creates rank `rank`'s file DIR/rank-RRRRR.safetensors under its temporary name (`file`, an
// io::AtomicFile: committed by the caller, removed if never committed), its header written and the
// file sized to its final length. It holds, in name order, every replicated tensor of `tensors`
// whole and every shard placed on `rank` (zero-size ones included), named by ShardTensorNames;
// its __metadata__ is `metadata` (index.json's, the same in every rank file; none if empty).
// `output` gets the file, its data start and dest[t][s]: where shard s of tensors[t] (s = 0 for a
// replicated one; -1 for shards of other ranks) starts in the data region.
// Errors: as safetensors::PlanFile and io::AtomicFile (Create, Write, Resize), naming the file.
[[nodiscard]] absl::Status CreateRankFile(const std::string& dir, int rank,
                                          const std::vector<StreamTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata,
                                          std::optional<io::AtomicFile>& file,
                                          StreamOutput& output);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_RANK_FILES_H_
