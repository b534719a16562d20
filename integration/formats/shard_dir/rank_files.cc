#include "integration/formats/shard_dir/rank_files.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"

namespace shardkit::shard_dir {

using safetensors::Reader;
using safetensors::TensorInfo;

std::map<std::string, std::string> RankFileMetadata(std::map<std::string, std::string> metadata,
                                                    const std::map<std::string, Shape>& offsets) {
  metadata.erase(kDcpShardingInfoKey);   // the checkpoint's own, if any: not this file's
  if (offsets.empty()) return metadata;  // an empty rank file's header stays `{}`
  std::map<std::string, Shape> placed;
  for (const auto& [name, at] : offsets) {
    // NAME#K (two shards of one parameter here) is no parameter torch could place: left out, so
    // that torch's reader refuses the directory (a KeyError naming it) instead of loading the
    // plainly named shards and leaving these rows unread.
    if (name.find('#') == std::string::npos) placed.emplace(name, at);
  }
  metadata[kDcpShardingInfoKey] = safetensors::ShardingInfoJson(placed);
  return metadata;
}

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

}  // namespace shardkit::shard_dir
