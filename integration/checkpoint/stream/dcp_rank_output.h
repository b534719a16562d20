// The `--format dcp` output of a stream (stream_shard.h): a PyTorch DCP checkpoint directory that
// torch's dcp.load reads into tensors of any layout. Rank R writes `__R_0.distcp`: one torch.save
// archive (integration/formats/torch_zip/torch_zip_writer.h) per shard placed on R, and on the
// source rank one per replicated tensor (written once, not once per rank), back to back in schedule
// order; every archive is written whole now but its values, which the stream writes in place.
// The source writes `.metadata` last (MakeDcpMetadata): every rank computes every file's layout
// the same way, so no rank needs to hear the others' offsets.
//
//   std::optional<os::AtomicFile> file;
//   StreamOutput output;  // dest[t][s]: where the values of shard s of tensor t start in the file
//   SHARDKIT_RETURN_IF_ERROR(CreateDcpRankFile(dir, rank, src_rank, tensors, {}, file, output));
//   ... StreamShards(...) ...; file->Commit();  then, on the source, after every rank committed:
//   SHARDKIT_ASSIGN_OR_RETURN(dcp::Metadata metadata, MakeDcpMetadata(tensors, world, src_rank));
//
// Non-tensor items (DcpExtras: an optimizer's param_groups, a step counter, ...) go as they came:
// their bytes, a torch.save archive of a Python object that nothing here reads, are written by the
// source after its archives, and listed in `.metadata` as torch lists them (BytesStorageMetadata),
// so that dcp.load of a whole training state finds every key.
//
// Zero-size shards hold no archive (DCP's chunks are boxes with data; their index keys, a chunk's
// offsets, would repeat for two empty shards at one offset); a tensor with no elements is one
// archive on the source, as a replicated one.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_DCP_RANK_OUTPUT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_DCP_RANK_OUTPUT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/files.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"
#include "integration/formats/dcp/metadata.h"

namespace shardkit::checkpoint {

// What a DCP output carries besides tensors: non-tensor items, by key, their bytes as they are;
// and each key's path in the nested state dict (planner_data) where known — keys without one get
// (key,) (metadata_writer.h).
struct DcpExtras {
  std::map<std::string, std::string> items;
  std::map<std::string, std::vector<dcp::PathStep>> planner_data;
};

// Creates rank `rank`'s file DIR/__R_0.distcp under its temporary name (`file`, committed by the
// caller), every archive's bytes but the values written, at its final size. `output` gets the
// file, data_start 0 and dest[t][s]: where the values of shard s of tensors[t] (s = 0: a
// replicated tensor) start in the file, -1 for what this rank does not write. On the source,
// `extras.items` follow the archives, written now.
// Errors: kInvalidArgument for a dtype torch.save cannot hold (naming the tensor); as
// os::AtomicFile (Create, WriteAt, Resize), naming the file.
[[nodiscard]] absl::Status CreateDcpRankFile(const std::string& dir, int rank, int src_rank,
                                             const std::vector<StreamTensor>& tensors,
                                             const DcpExtras& extras,
                                             std::optional<os::AtomicFile>& file,
                                             StreamOutput& output);

// How many tensors (archives: shards, or whole tensors on the source) rank `rank`'s file holds,
// what CreateDcpRankFile writes.
int64_t DcpFileTensors(const std::vector<StreamTensor>& tensors, int rank, int src_rank);

// The metadata of the checkpoint that `world` ranks wrote with CreateDcpRankFile: every tensor
// (name order) with its chunks, each in the file and at the range where its archive lies, then
// the extras' items where the source wrote them, and their planner_data.
// Errors: as CreateDcpRankFile's dtype check.
[[nodiscard]] absl::StatusOr<dcp::Metadata> MakeDcpMetadata(
    const std::vector<StreamTensor>& tensors, int world, int src_rank,
    const DcpExtras& extras = {});

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_DCP_RANK_OUTPUT_H_
