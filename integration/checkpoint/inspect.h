// InspectPath: `shardkit inspect` as a library — a plain-text table of a checkpoint (a safetensors
// file, a Hugging Face index, or a directory holding one: checkpoint_source.h) or of a shard
// directory, for stdout.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::string table, InspectPath("shards"));
//
// A checkpoint: one row per tensor (name, dtype, shape, bytes) in name order, then its
// __metadata__ (key, value) if any, then for an index each of its files. A shard directory
// (validated with ReadIndex): one row per parameter (name, dtype, shape, bytes, spec, then one
// column per rank with the sizes of that rank's shards, "-" for none), then the index's
// world_size, src_rank, strategy and metadata.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_INSPECT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_INSPECT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::checkpoint {

// A shard directory's rank files are checked as gather checks them (OpenRankFiles: well-formed,
// as long as their headers say, holding exactly the listed shards). Warnings about a checkpoint
// (CheckpointSource::Open's: e.g. one file of a multi-file checkpoint given alone) are appended
// to `warnings` when it is not null; they are not part of the table.
// Errors: kNotFound if `path` does not exist (or a directory has no index.json, or a rank file
// or a listed shard is missing); kInvalidArgument for malformed content, as
// safetensors::Reader::Open, ReadIndex and OpenRankFiles, naming the file.
[[nodiscard]] absl::StatusOr<std::string> InspectPath(const std::string& path,
                                                      std::vector<std::string>* warnings = nullptr);

// The table InspectPath prints for a shard directory, of `index`. With `rules` (one cell per
// parameter, in index.parameters' order) a `rule` column follows `spec` (the dry run of `spec
// check --checkpoint` shows which plan rule laid each parameter out).
std::string FormatShardIndex(const ShardIndex& index, const std::vector<std::string>& rules = {});

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_INSPECT_H_
