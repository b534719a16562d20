#include "integration/checkpoint/gather_checkpoint.h"

#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/engine/sharded_tensor.h"
#include "integration/checkpoint/progress.h"
#include "integration/checkpoint/shard_dir.h"
#include "integration/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

using safetensors::Reader;
using safetensors::TensorInfo;

absl::StatusOr<std::vector<Reader>> OpenRankFiles(const std::string& dir, const ShardIndex& index) {
  std::vector<Reader> readers;
  for (int64_t rank = 0; rank < index.world_size; ++rank) {
    SHARDKIT_ASSIGN_OR_RETURN(
        Reader reader, Reader::Open((std::filesystem::path(dir) / RankFileName(rank)).string()));
    readers.push_back(std::move(reader));
  }
  return readers;
}

absl::StatusOr<const TensorInfo*> FindShard(const std::vector<Reader>& readers,
                                            const IndexParameter& parameter, size_t i) {
  const IndexShard& shard = parameter.shards[i];
  const Reader& reader = readers[static_cast<size_t>(shard.metadata.placement.rank())];
  SHARDKIT_ASSIGN_OR_RETURN(const TensorInfo* info, reader.Find(shard.tensor));
  if (info->dtype != parameter.dtype || info->shape != shard.metadata.sizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": tensor \"", shard.tensor, "\" is ",
        std::string(SafetensorsName(info->dtype)), ShapeToString(info->shape),
        " but index.json says shard ", i, " of parameter \"", parameter.name, "\" is ",
        std::string(SafetensorsName(parameter.dtype)), ShapeToString(shard.metadata.sizes)));
  }
  return info;
}

// Every listed shard is present with the right dtype and shape; nothing else is in the files.
absl::Status VerifyShards(const std::vector<Reader>& readers, const ShardIndex& index) {
  std::vector<std::set<std::string>> listed(readers.size());
  for (const IndexParameter& parameter : index.parameters) {
    for (size_t i = 0; i < parameter.shards.size(); ++i) {
      SHARDKIT_RETURN_IF_ERROR(FindShard(readers, parameter, i).status());
      const IndexShard& shard = parameter.shards[i];
      listed[static_cast<size_t>(shard.metadata.placement.rank())].insert(shard.tensor);
    }
  }
  for (size_t rank = 0; rank < readers.size(); ++rank) {
    for (const TensorInfo& info : readers[rank].header().tensors) {
      if (!listed[rank].contains(info.name)) {
        return absl::InvalidArgumentError(absl::StrCat(readers[rank].path(), ": tensor \"",
                                                       info.name, "\" is not listed in ",
                                                       kIndexFileName));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Assemble(const std::vector<Reader>& readers, const ShardIndex& index,
                                const IndexParameter& parameter) {
  if (!parameter.spec) {  // replicated: the source's copy
    for (size_t i = 0; i < parameter.shards.size(); ++i) {
      const IndexShard& shard = parameter.shards[i];
      if (shard.metadata.placement.rank() != index.src_rank) continue;
      return readers[static_cast<size_t>(index.src_rank)].ReadTensor(shard.tensor);
    }
  }
  SHARDKIT_ASSIGN_OR_RETURN(Tensor full, Tensor::Empty(parameter.shape, parameter.dtype));
  for (size_t i = 0; i < parameter.shards.size(); ++i) {
    const IndexShard& shard = parameter.shards[i];
    const Reader& reader = readers[static_cast<size_t>(shard.metadata.placement.rank())];
    SHARDKIT_ASSIGN_OR_RETURN(const TensorInfo* info, FindShard(readers, parameter, i));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor view, NarrowToShard(full, shard.metadata));
    if (view.IsContiguous()) {
      SHARDKIT_RETURN_IF_ERROR(reader.ReadBytes(*info, 0, info->end - info->begin, view.data()));
      continue;
    }
    SHARDKIT_ASSIGN_OR_RETURN(Tensor piece, reader.ReadTensor(shard.tensor));
    SHARDKIT_RETURN_IF_ERROR(view.CopyFrom(piece));
  }
  return full;
}

}  // namespace

absl::Status GatherCheckpoint(const std::string& in_dir, const std::string& out_path,
                              std::ostream& log, bool progress) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardIndex index, ReadIndex(in_dir));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Reader> readers, OpenRankFiles(in_dir, index));
  SHARDKIT_RETURN_IF_ERROR(VerifyShards(readers, index));
  std::vector<TensorInfo> infos;
  int64_t total_bytes = 0;
  for (const IndexParameter& parameter : index.parameters) {
    infos.push_back({parameter.name, parameter.dtype, parameter.shape, 0, 0});
    total_bytes += ComputeShapeSize(parameter.shape, parameter.dtype)->nbytes;
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      safetensors::Writer writer,
      safetensors::Writer::Create(out_path, std::move(infos), index.metadata));
  Progress meter(log, progress, "shardkit gather: writing",
                 static_cast<int64_t>(index.parameters.size()), total_bytes);
  // index.parameters and writer.tensors() are both in name order.
  for (size_t i = 0; i < index.parameters.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor, Assemble(readers, index, index.parameters[i]));
    SHARDKIT_RETURN_IF_ERROR(writer.Append(tensor));
    meter.Step(static_cast<int64_t>(i + 1), static_cast<int64_t>(writer.tensors()[i].end));
  }
  SHARDKIT_RETURN_IF_ERROR(writer.Commit());
  log << absl::StrFormat("shardkit gather: %d parameters (%s) from %d rank files to %s in %.3f s\n",
                         index.parameters.size(), FormatBytes(total_bytes), index.world_size,
                         out_path, meter.Elapsed())
      << std::flush;
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
