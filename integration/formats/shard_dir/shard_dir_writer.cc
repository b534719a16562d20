// ShardDirOutput's files (shard_dir_output.h): the rank files and index.json.
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/shard_dir/rank_files.h"
#include "integration/formats/shard_dir/shard_dir.h"
#include "integration/formats/shard_dir/shard_dir_output.h"
#include "specs/fingerprint.h"
#include "specs/parameter_layout.h"

namespace shardkit::shard_dir {
namespace {

using formats::OutputContent;
using formats::OutputTensor;
using safetensors::TensorInfo;

// `tensor`'s layout as index.json lists it: its spec's shards, or one whole-tensor shard per rank
// of `world` (specs::LayOutParameter's replicated layout).
specs::ParameterLayout LayoutOf(const OutputTensor& tensor, int world) {
  specs::ParameterLayout layout{std::nullopt, tensor.spec_json,
                                specs::Fingerprint(tensor.spec_json), tensor.shards};
  if (!tensor.replicated) return layout;
  layout.shards.clear();
  for (int rank = 0; rank < world; ++rank) {
    layout.shards.push_back(
        {Shape(tensor.shape.size(), 0), tensor.shape, specs::Placement::ForRank(rank)});
  }
  return layout;
}

}  // namespace

std::string ShardDirOutput::RankFileName(int rank) const { return shard_dir::RankFileName(rank); }

absl::Status ShardDirOutput::CreateRankFile(const std::string& dir, int rank,
                                            const OutputContent& content,
                                            formats::RankFile& file) const {
  const formats::OutputTensors& tensors = content.tensors;
  std::vector<TensorInfo> infos;
  std::map<std::string, std::pair<size_t, size_t>> slot_of;  // tensor name -> (tensor, shard)
  std::map<std::string, Shape> offsets;                      // tensor name -> its offsets
  for (size_t t = 0; t < tensors.size(); ++t) {
    const OutputTensor& tensor = tensors[t];
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
      safetensors::PlanFile(path, std::move(infos), RankFileMetadata(*content.metadata, offsets)));
  file.dest.assign(tensors.size(), {});
  for (size_t t = 0; t < tensors.size(); ++t) {
    file.dest[t].assign(std::max<size_t>(tensors[t].shards.size(), 1), -1);
  }
  for (const TensorInfo& info : layout.tensors) {
    const auto [t, s] = slot_of[info.name];
    file.dest[t][s] = static_cast<int64_t>(info.begin);
  }
  SHARDKIT_ASSIGN_OR_RETURN(os::AtomicFile created, os::AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(created.Write(layout.prefix.data(), layout.prefix.size()));
  SHARDKIT_RETURN_IF_ERROR(created.Resize(layout.prefix.size() + layout.data_size));
  file.sink = std::make_unique<formats::FileSink>(std::move(created));
  file.data_start = static_cast<int64_t>(layout.prefix.size());
  return absl::OkStatus();
}

std::vector<int64_t> ShardDirOutput::RankFileTensors(const OutputContent& content) const {
  std::vector<int64_t> count(static_cast<size_t>(content.world_size), 0);
  for (size_t t = 0; t < content.tensors.size(); ++t) {
    const OutputTensor& tensor = content.tensors[t];
    if (tensor.replicated) {
      for (int64_t& n : count) ++n;
      continue;
    }
    for (const specs::ShardMetadata& shard : tensor.shards) {
      ++count[static_cast<size_t>(shard.placement.rank())];
    }
  }
  return count;
}

absl::Status ShardDirOutput::WriteLastFile(const std::string& dir,
                                           const OutputContent& content) const {
  SHARDKIT_ASSIGN_OR_RETURN(const WrittenBy written_by, ParseWrittenBy(content.written_by));
  ShardIndex index{content.world_size, content.src_rank, written_by, *content.metadata, {}};
  for (size_t t = 0; t < content.tensors.size(); ++t) {
    const OutputTensor& tensor = content.tensors[t];
    index.parameters.push_back(MakeIndexParameter(tensor.name, tensor.dtype, tensor.shape,
                                                  LayoutOf(tensor, content.world_size)));
  }
  std::sort(index.parameters.begin(), index.parameters.end(),
            [](const IndexParameter& a, const IndexParameter& b) { return a.name < b.name; });
  return WriteIndex(dir, index);
}

}  // namespace shardkit::shard_dir
