// OpenSavedDirectory: a directory of saved shards as a TensorSource, whichever format holds them
// — a PyTorch DCP checkpoint (`.metadata` or `__0.metadata`: DcpSource), the sharded safetensors
// files of torch's HuggingFaceStorageWriter (DCP_SHARDING_INFO: HfShardedSource) or a shardkit
// shard directory (ShardDirSource) — for the readers that take any: `reshard --in`, `gather`,
// LoadShards and `spec check --checkpoint`.
//
//   std::vector<std::string> warnings;
//   SHARDKIT_ASSIGN_OR_RETURN(SavedDirectory saved, OpenSavedDirectory(dir, staging, &warnings));
//   // saved.source->header(): every tensor whole; saved.files: its rank or .distcp files
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SAVED_DIRECTORY_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SAVED_DIRECTORY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/selected_source.h"
#include "integration/checkpoint/source/tensor_source.h"

namespace shardkit::checkpoint {

class DcpSource;

struct SavedDirectory {
  std::unique_ptr<TensorSource> source;
  // `source` when it is a DCP checkpoint with DCP metadata (DcpSource): its non-tensor items and
  // planner_data, for the outputs that carry them. Null otherwise.
  const DcpSource* dcp_source = nullptr;
  bool dcp = false;        // saved by PyTorch DCP (either writer), not a shard directory
  int64_t files = 0;       // its data files: rank files (the world size), .distcp or safetensors
  std::string files_kind;  // "rank files", ".distcp files", "safetensors files"
  std::string last_file;   // what lists its tensors: "index.json", the metadata file(s), the files
};

// A shard directory's index (ReadIndex), for the commands that name what they found instead when
// there is none: a PyTorch DCP save without its metadata (dcp::UnfinishedSave) is named as one.
// Errors: as ReadIndex (kNotFound naming the unfinished DCP save where there is one).
[[nodiscard]] absl::StatusOr<ShardIndex> ReadSavedIndex(const std::string& dir);

// Whether `dir` is saved by PyTorch DCP: it holds DCP metadata (dcp::IsDcpDirectory) or the
// sharded safetensors files of its Hugging Face writer (HfShardedSource::Holds).
bool IsDcpSaved(const std::string& dir);

// Opens `dir` with a staging buffer of `staging_bytes`: as DcpSource::Open when `dir` holds DCP
// metadata, as HfShardedSource::Open for a sharded Hugging Face save, else as
// ShardDirSource::Open. Errors: theirs.
[[nodiscard]] absl::StatusOr<SavedDirectory> OpenSavedDirectory(const std::string& dir,
                                                                int64_t staging_bytes);

// A saved directory's source seen through `select` (SelectTensors: the DCP checkpoint's non-tensor
// items count as names its patterns may match), the directory's `source` moved into it. Unless
// `items_carried` (the caller's output takes them over: --format dcp), the items the selection
// picks are named in one warning appended to `warnings` (DcpSource::SkippedWarning): what the
// commands that read tensors only print. Errors: as SelectTensors.
[[nodiscard]] absl::StatusOr<std::unique_ptr<TensorSource>> SelectSaved(
    SavedDirectory& saved, const TensorSelection& select, bool items_carried,
    std::vector<std::string>* warnings);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SAVED_DIRECTORY_H_
