// InspectPath: `shardkit inspect` as a library — what a checkpoint (a safetensors file, a Hugging
// Face index, or a directory holding one: checkpoint_source.h) or a shard directory holds, as
// data: a table's column names and rows of cells, then label/value facts. The CLI lays it out
// (integration/report/inspect_table.h); a program can read the cells.
//
//   SHARDKIT_ASSIGN_OR_RETURN(Inspection inspection, InspectPath("shards"));
//   for (const std::vector<std::string>& row : inspection.rows) { ... }  // row[0]: a name
//
// A checkpoint: one row per tensor (name, dtype, shape, bytes) in name order, then its
// __metadata__, then for an index each of its files. A shard directory (validated with
// ReadIndex): one row per parameter (name, dtype, shape, bytes, spec, then one column per rank
// with the sizes of that rank's shards, "-" for none), then the index's world_size, src_rank,
// strategy and metadata. A PyTorch DCP checkpoint (its metadata and every chunk's record checked:
// DcpSource::Open): one row per tensor (name, dtype, shape, bytes, chunks: how many boxes it was
// saved in), then the facts format, its metadata files, DCP's version, the number of `.distcp`
// files, and one `non-tensor` fact per item that is no tensor (not read by any command).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_INSPECT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_INSPECT_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/shard_index.h"

namespace shardkit::checkpoint {

// What was inspected. Each kind has its own columns; more kinds may come (the rows and facts are
// cells and labels, not fields of one kind).
enum class InspectedKind {
  kCheckpoint,      // a safetensors file or a Hugging Face index (a rank file is one too)
  kShardDirectory,  // index.json and its rank files
  kDcpCheckpoint,   // a PyTorch DCP checkpoint directory (.metadata and .distcp files)
};

struct Inspection {
  InspectedKind kind = InspectedKind::kCheckpoint;
  std::vector<std::string> columns;            // e.g. name, dtype, shape, bytes
  std::vector<std::vector<std::string>> rows;  // one cell per column, one row per tensor
  // After the table, in this order: facts of the whole (a shard directory's world_size, src_rank,
  // strategy: {label, value}), the __metadata__ (or index.json's metadata) by key, and the files
  // of a Hugging Face index in their order.
  std::vector<std::pair<std::string, std::string>> facts;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> files;
};

// A shard directory's rank files are checked as gather checks them (OpenRankFiles: well-formed,
// as long as their headers say, holding exactly the listed shards). Warnings about a checkpoint
// (CheckpointSource::Open's: e.g. one file of a multi-file checkpoint given alone) are appended
// to `warnings` when it is not null; they are not part of the inspection.
// Errors: kNotFound if `path` does not exist (or a directory has no index.json, or a rank file
// or a listed shard is missing); kInvalidArgument for malformed content, as
// safetensors::Reader::Open, ReadIndex and OpenRankFiles, naming the file.
[[nodiscard]] absl::StatusOr<Inspection> InspectPath(const std::string& path,
                                                     std::vector<std::string>* warnings = nullptr);

// What InspectPath returns for a shard directory, of `index` (its rank files not read). With
// `rules` (one cell per parameter, in index.parameters' order) a `rule` column follows `spec`
// (the dry run of `spec check --checkpoint` shows which plan rule laid each parameter out).
Inspection InspectShardIndex(const ShardIndex& index, const std::vector<std::string>& rules = {});

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_INSPECT_H_
