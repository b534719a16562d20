// The writer of a DCP checkpoint's `.metadata` (the reader is metadata.h): the pickle that torch
// 2.15's dcp.load, FileSystemReader and format_utils.dcp_to_torch_save read, made from shardkit's
// description of the checkpoint. Bytes only: the caller writes them (last, after every item file
// is durable, as torch does).
//
//   dcp::Metadata metadata;
//   metadata.tensors.push_back({.fqn = "w", .dtype = DType::kBFloat16, .shape = {4, 6},
//                               .chunks = {{.offsets = {0, 0}, .sizes = {4, 6},
//                                           .item = {"__0_0.distcp", 0, archive.size()}}}});
//   std::string bytes = dcp::SerializeMetadata(metadata);  // -> DIR/.metadata
//
// What is written (pickle protocol 2; Python's pickle.load and ParseMetadata read it):
// Metadata(state_dict_metadata = {fqn: TensorStorageMetadata(properties = TensorProperties(dtype,
// torch.strided, requires_grad False, contiguous_format, pin_memory False, strides = the row-major
// strides of the tensor's shape), size, chunks = [ChunkStorageMetadata(offsets, sizes)...])},
// planner_data = {fqn: path} (metadata.planner_data's path when it has one for fqn, else (fqn,),
// so that dcp_to_torch_save keeps flat names), storage_data = {MetadataIndex(fqn, index = the
// chunk's position, offset = its offsets): _StorageInfo(relative_path, offset, length)} (no
// transform_descriptors: torch leaves that field out when it is None), storage_meta None,
// version "1.0.0"), tensors in `metadata.tensors` order, then the non-tensor items
// (metadata.bytes: BytesStorageMetadata(), their paths in planner_data, and storage_data keys
// MetadataIndex(fqn) without offset or index, as torch writes them). `files` and `digest` are not
// written (they describe what was read). Same input, same bytes.
//
// Nothing is checked here (no errors): the caller describes a checkpoint it made — chunks that
// cover each tensor, unique offsets per tensor, items inside their files. ParseMetadata checks
// all of that when the checkpoint is read.
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_METADATA_WRITER_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_METADATA_WRITER_H_

#include <string>

#include "integration/formats/dcp/metadata.h"

namespace shardkit::dcp {

// The Metadata.version written (torch 2.15's).
inline constexpr char kDcpMetadataVersion[] = "1.0.0";

// The `.metadata` pickle of `metadata`'s tensors, as the file comment says.
std::string SerializeMetadata(const Metadata& metadata);

}  // namespace shardkit::dcp

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_METADATA_WRITER_H_
