#include "integration/checkpoint/rank_files.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"

namespace shardkit::checkpoint {

using safetensors::Reader;
using safetensors::TensorInfo;

absl::StatusOr<std::vector<Reader>> OpenRankFiles(const std::string& dir, const ShardIndex& index) {
  std::vector<Reader> readers;
  for (int64_t rank = 0; rank < index.world_size; ++rank) {
    SHARDKIT_ASSIGN_OR_RETURN(
        Reader reader, Reader::Open((std::filesystem::path(dir) / RankFileName(rank)).string()));
    readers.push_back(std::move(reader));
  }
  SHARDKIT_RETURN_IF_ERROR(VerifyShards(readers, index));
  return readers;
}

absl::StatusOr<const TensorInfo*> FindShard(const std::vector<Reader>& readers,
                                            const IndexParameter& parameter, size_t i) {
  const IndexShard& shard = parameter.shards[i];
  const Reader& reader = readers[static_cast<size_t>(shard.metadata.placement.rank())];
  SHARDKIT_ASSIGN_OR_RETURN(const TensorInfo* info, reader.Find(shard.tensor));
  if (info->dtype != parameter.dtype || info->shape != shard.metadata.sizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": tensor ", QuoteName(shard.tensor), " is ",
        std::string(SafetensorsName(info->dtype)), ShapeToString(info->shape),
        " but index.json says shard ", i, " of parameter ", QuoteName(parameter.name), " is ",
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

absl::Status CreateRankFile(const std::string& dir, int rank,
                            const std::vector<StreamTensor>& tensors,
                            const std::map<std::string, std::string>& metadata,
                            std::optional<io::AtomicFile>& file, StreamOutput& output) {
  std::vector<TensorInfo> infos;
  std::map<std::string, std::pair<size_t, size_t>> slot_of;  // tensor name -> (tensor, shard)
  for (size_t t = 0; t < tensors.size(); ++t) {
    const StreamTensor& tensor = tensors[t];
    if (tensor.replicated) {
      infos.push_back({tensor.name, tensor.dtype, tensor.shape, 0, 0});
      slot_of[tensor.name] = {t, 0};
      continue;
    }
    const std::vector<std::string> names = ShardTensorNames(tensor.name, tensor.shards);
    for (size_t s = 0; s < tensor.shards.size(); ++s) {
      if (tensor.shards[s].placement.rank() != rank) continue;
      infos.push_back({names[s], tensor.dtype, tensor.shards[s].sizes, 0, 0});
      slot_of[names[s]] = {t, s};
    }
  }
  const std::string path = (std::filesystem::path(dir) / RankFileName(rank)).string();
  SHARDKIT_ASSIGN_OR_RETURN(safetensors::FileLayout layout,
                            safetensors::PlanFile(path, std::move(infos), metadata));
  output.dest.assign(tensors.size(), {});
  for (size_t t = 0; t < tensors.size(); ++t) {
    output.dest[t].assign(std::max<size_t>(tensors[t].shards.size(), 1), -1);
  }
  for (const TensorInfo& info : layout.tensors) {
    const auto [t, s] = slot_of[info.name];
    output.dest[t][s] = static_cast<int64_t>(info.begin);
  }
  SHARDKIT_ASSIGN_OR_RETURN(file, io::AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file->Write(layout.prefix.data(), layout.prefix.size()));
  SHARDKIT_RETURN_IF_ERROR(file->Resize(layout.prefix.size() + layout.data_size));
  output.file = &*file;
  output.data_start = static_cast<int64_t>(layout.prefix.size());
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
