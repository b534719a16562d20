// The files of a PyTorch DCP checkpoint that shardkit writes (DcpOutput, dcp_output.h), which
// torch's dcp.load reads into tensors of any layout. Rank R writes `__R_0.distcp`: one torch.save
// archive (integration/formats/torch_zip/torch_zip_writer.h) per shard placed on R, and on the
// source rank one per replicated tensor (written once, not once per rank), back to back in the
// stream's order; every archive is written whole now but its values, which the caller writes in
// place. The source writes `.metadata` last (MakeDcpMetadata): every rank computes every file's
// layout the same way, so no rank needs to hear the others' offsets.
//
//   formats::RankFile file;  // dest[t][s]: where the values of shard s of tensor t start
//   SHARDKIT_RETURN_IF_ERROR(CreateDcpRankFile(dir, rank, src_rank, tensors, {}, file));
//   ... write the values ...; file.sink->Commit();  then, on the source, after every rank
//   committed: SHARDKIT_ASSIGN_OR_RETURN(dcp::Metadata metadata, MakeDcpMetadata(tensors, world,
//   src_rank));
//
// Non-tensor items (formats::OutputItems: an optimizer's param_groups, a step counter, ...) go as
// they came: their bytes, a torch.save archive of a Python object that nothing here reads, are
// written by the source after its archives, and listed in `.metadata` as torch lists them
// (BytesStorageMetadata), so that dcp.load of a whole training state finds every key.
//
// Zero-size shards hold no archive (DCP's chunks are boxes with data; their index keys, a chunk's
// offsets, would repeat for two empty shards at one offset); a tensor with no elements is one
// archive on the source, as a replicated one.
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_RANK_FILE_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_RANK_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/output_file/output_writer.h"

namespace shardkit::dcp {

// Creates rank `rank`'s file DIR/__R_0.distcp under its temporary name (`file.sink`, committed
// by the caller), every archive's bytes but the values written, at its final size; data_start 0
// and dest[t][s]: where the values of shard s of tensors[t] (s = 0: a replicated tensor) start in
// the file, -1 for what this rank does not write. On the source, `items.bytes` follow the
// archives, written now.
// Errors: kInvalidArgument for a dtype torch.save cannot hold (naming the tensor); as
// os::AtomicFile (Create, WriteAt, Resize), naming the file.
[[nodiscard]] absl::Status CreateDcpRankFile(const std::string& dir, int rank, int src_rank,
                                             const formats::OutputTensors& tensors,
                                             const formats::OutputItems& items,
                                             formats::RankFile& file);

// How many tensors (archives: shards, or whole tensors on the source) rank `rank`'s file holds,
// what CreateDcpRankFile writes.
int64_t DcpFileTensors(const formats::OutputTensors& tensors, int rank, int src_rank);

// The metadata of the checkpoint that `world` ranks wrote with CreateDcpRankFile: every tensor
// (name order) with its chunks, each in the file and at the range where its archive lies, then
// the items where the source wrote them, and their paths as planner_data (keys without one get
// (key,): metadata_writer.h).
// Errors: as CreateDcpRankFile's dtype check.
[[nodiscard]] absl::StatusOr<Metadata> MakeDcpMetadata(const formats::OutputTensors& tensors,
                                                       int world, int src_rank,
                                                       const formats::OutputItems& items = {});

}  // namespace shardkit::dcp

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_RANK_FILE_H_
