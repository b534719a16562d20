// CreateRankFile: a rank file of a shard directory (formats/shard_dir/rank_files.h), created by
// the writers of one (`shard`, `reshard`: ShardCheckpoint; SaveShards) as the output of a stream
// (stream_shard.h): header written, the file at its final size, every shard's offset known.
//
//   std::optional<os::AtomicFile> file;
//   StreamOutput output;
//   SHARDKIT_RETURN_IF_ERROR(CreateRankFile(dir, rank, tensors, metadata, file, output));
//   // ... file->WriteAt(output.data_start + output.dest[t][s] + k, ...) ...; file->Commit()
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_RANK_FILE_OUTPUT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_RANK_FILE_OUTPUT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/os/files.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"

namespace shardkit::checkpoint {

// Creates rank `rank`'s file DIR/rank-RRRRR.safetensors under its temporary name (`file`, an
// os::AtomicFile: committed by the caller, removed if never committed), its header written and the
// file sized to its final length. It holds, in name order, every replicated tensor of `tensors`
// whole and every shard placed on `rank` (zero-size ones included), named by ShardTensorNames;
// its __metadata__ is `metadata` (index.json's) with DCP_SHARDING_INFO giving every tensor's
// offsets (RankFileMetadata, formats/shard_dir/rank_files.h), so that torch's
// HuggingFaceStorageReader can load the directory.
// `output` gets the file, its data start and dest[t][s]: where shard s of tensors[t] (s = 0 for a
// replicated one; -1 for shards of other ranks) starts in the data region.
// Errors: as safetensors::PlanFile and os::AtomicFile (Create, Write, Resize), naming the file.
[[nodiscard]] absl::Status CreateRankFile(const std::string& dir, int rank,
                                          const std::vector<StreamTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata,
                                          std::optional<os::AtomicFile>& file,
                                          StreamOutput& output);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_RANK_FILE_OUTPUT_H_
