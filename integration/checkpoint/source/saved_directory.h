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

// Whether `dir` is saved by PyTorch DCP: it holds DCP metadata (dcp::IsDcpDirectory) or the
// sharded safetensors files of its Hugging Face writer (HfShardedSource::Holds).
bool IsDcpSaved(const std::string& dir);

// Opens `dir` with a staging buffer of `staging_bytes`: as DcpSource::Open when `dir` holds DCP
// metadata (its non-tensor items then named in one warning appended to `warnings`, unless
// `items_carried`: the caller's output takes them over), as
// HfShardedSource::Open for a sharded Hugging Face save, else as ShardDirSource::Open.
// Errors: theirs.
[[nodiscard]] absl::StatusOr<SavedDirectory> OpenSavedDirectory(const std::string& dir,
                                                                int64_t staging_bytes,
                                                                std::vector<std::string>* warnings,
                                                                bool items_carried = false);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SAVED_DIRECTORY_H_
