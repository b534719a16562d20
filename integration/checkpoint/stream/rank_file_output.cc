#include "integration/checkpoint/stream/rank_file_output.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "core/base/status_macros.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/shard_dir/rank_files.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::checkpoint {

using safetensors::TensorInfo;

absl::Status CreateRankFile(const std::string& dir, int rank,
                            const std::vector<StreamTensor>& tensors,
                            const std::map<std::string, std::string>& metadata,
                            std::optional<os::AtomicFile>& file, StreamOutput& output) {
  std::vector<TensorInfo> infos;
  std::map<std::string, std::pair<size_t, size_t>> slot_of;  // tensor name -> (tensor, shard)
  std::map<std::string, Shape> offsets;                      // tensor name -> its offsets
  for (size_t t = 0; t < tensors.size(); ++t) {
    const StreamTensor& tensor = tensors[t];
    if (tensor.replicated) {
      infos.push_back({tensor.name, tensor.dtype, tensor.shape, 0, 0});
      slot_of[tensor.name] = {t, 0};
      offsets[tensor.name] = Shape(tensor.shape.size(), 0);
      continue;
    }
    const std::vector<std::string> names = ShardTensorNames(tensor.name, tensor.shards);
    for (size_t s = 0; s < tensor.shards.size(); ++s) {
      if (tensor.shards[s].placement.rank() != rank) continue;
      infos.push_back({names[s], tensor.dtype, tensor.shards[s].sizes, 0, 0});
      slot_of[names[s]] = {t, s};
      offsets[names[s]] = tensor.shards[s].offsets;
    }
  }
  const std::string path = (std::filesystem::path(dir) / RankFileName(rank)).string();
  SHARDKIT_ASSIGN_OR_RETURN(
      safetensors::FileLayout layout,
      safetensors::PlanFile(path, std::move(infos), RankFileMetadata(metadata, offsets)));
  output.dest.assign(tensors.size(), {});
  for (size_t t = 0; t < tensors.size(); ++t) {
    output.dest[t].assign(std::max<size_t>(tensors[t].shards.size(), 1), -1);
  }
  for (const TensorInfo& info : layout.tensors) {
    const auto [t, s] = slot_of[info.name];
    output.dest[t][s] = static_cast<int64_t>(info.begin);
  }
  SHARDKIT_ASSIGN_OR_RETURN(file, os::AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file->Write(layout.prefix.data(), layout.prefix.size()));
  SHARDKIT_RETURN_IF_ERROR(file->Resize(layout.prefix.size() + layout.data_size));
  output.file = &*file;
  output.data_start = static_cast<int64_t>(layout.prefix.size());
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
