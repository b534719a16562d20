#include "integration/checkpoint/inspect.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/checkpoint_source.h"
#include "integration/checkpoint/source/dcp_source.h"
#include "integration/checkpoint/source/hf_sharded_source.h"
#include "integration/checkpoint/source/saved_directory.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

// DcpSource::Open's staging buffer; inspect reads no tensor bytes.
constexpr int64_t kNoReads = int64_t{64} << 10;

std::string NBytes(const Shape& shape, DType dtype) {
  return absl::StrCat(ComputeShapeSize(shape, dtype)->nbytes);
}

absl::StatusOr<Inspection> InspectCheckpoint(const CheckpointPath& where,
                                             std::vector<std::string>* warnings) {
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::Open(where, warnings));
  std::vector<safetensors::TensorInfo> tensors = source.header().tensors;
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  Inspection inspection{.kind = InspectedKind::kCheckpoint,
                        .columns = {"name", "dtype", "shape", "bytes"},
                        .metadata = source.header().metadata};
  for (const safetensors::TensorInfo& info : tensors) {
    inspection.rows.push_back({info.name, std::string(SafetensorsName(info.dtype)),
                               ShapeToString(info.shape), NBytes(info.shape, info.dtype)});
  }
  if (where.kind == CheckpointKind::kIndex) {  // the files of the index, in their order
    for (size_t f = 0; f < source.file_count(); ++f) {
      inspection.files.push_back(source.file_path(f));
    }
  }
  return inspection;
}

std::string DescribeSpec(const IndexParameter& parameter) {
  if (!parameter.spec) return "replicated";
  if (const auto* chunk = std::get_if<specs::ChunkShardingSpec>(&*parameter.spec)) {
    if (chunk->align == 1) return absl::StrCat("chunk(dim=", chunk->dim, ")");
    return absl::StrCat("chunk(dim=", chunk->dim, ",align=", chunk->align, ")");
  }
  return absl::StrCat("enumerable(", parameter.shards.size(), ")");
}

// One cell per rank: the sizes of the shards that rank holds ("-" for none).
std::vector<std::string> ShardsPerRank(const IndexParameter& parameter, int64_t world_size) {
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(world_size));
  for (const IndexShard& shard : parameter.shards) {
    cells[static_cast<size_t>(shard.metadata.placement.rank())].push_back(
        ShapeToString(shard.metadata.sizes));
  }
  std::vector<std::string> row;
  for (const auto& cell : cells) row.push_back(cell.empty() ? "-" : absl::StrJoin(cell, "+"));
  return row;
}

absl::StatusOr<Inspection> InspectDirectory(const std::string& dir) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardIndex index, ReadSavedIndex(dir));
  SHARDKIT_RETURN_IF_ERROR(OpenRankFiles(dir, index).status());
  return InspectShardIndex(index);
}

// A DCP checkpoint: its tensors with their chunk counts, then what the metadata says of the whole.
absl::StatusOr<Inspection> InspectDcp(const std::string& dir) {
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<DcpSource> source, DcpSource::Open(dir, kNoReads));
  const dcp::Metadata& metadata = source->metadata();
  Inspection inspection{.kind = InspectedKind::kDcpCheckpoint,
                        .columns = {"name", "dtype", "shape", "bytes", "chunks"}};
  for (const dcp::TensorEntry& tensor : metadata.tensors) {
    inspection.rows.push_back({tensor.fqn, std::string(SafetensorsName(tensor.dtype)),
                               ShapeToString(tensor.shape), NBytes(tensor.shape, tensor.dtype),
                               absl::StrCat(tensor.chunks.size())});
  }
  inspection.facts = {{"format", "PyTorch DCP"},
                      {"metadata", absl::StrJoin(metadata.files, ", ")},
                      {"version", metadata.version.empty() ? "-" : metadata.version},
                      {"distcp_files", absl::StrCat(source->identity().size() - 1)}};
  // One row for every non-tensor item (an AdamW state has hundreds): how many, the first names.
  const std::vector<std::string> items = source->skipped();
  if (!items.empty()) {
    inspection.facts.push_back(
        {"non-tensor", absl::StrCat(items.size(), items.size() == 1 ? " item" : " items",
                                    " (not tensors; carried by --format dcp, else not read): ",
                                    JoinFirst(items, 4))});
  }
  return inspection;
}

// The sharded safetensors files of torch's Hugging Face writer: the tensors with their piece
// counts, then the files' number and the metadata they agree on.
absl::StatusOr<Inspection> InspectHfSharded(const std::string& dir) {
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<HfShardedSource> source,
                            HfShardedSource::Open(dir, kNoReads));
  Inspection inspection{.kind = InspectedKind::kDcpCheckpoint,
                        .columns = {"name", "dtype", "shape", "bytes", "chunks"},
                        .metadata = source->header().metadata};
  const std::vector<safetensors::TensorInfo>& tensors = source->header().tensors;
  for (size_t t = 0; t < tensors.size(); ++t) {
    inspection.rows.push_back({tensors[t].name, std::string(SafetensorsName(tensors[t].dtype)),
                               ShapeToString(tensors[t].shape),
                               NBytes(tensors[t].shape, tensors[t].dtype),
                               absl::StrCat(source->pieces(t))});
  }
  inspection.facts = {{"format", "PyTorch DCP, Hugging Face writer (sharded safetensors)"},
                      {"safetensors_files", absl::StrCat(source->identity().size())}};
  return inspection;
}

}  // namespace

Inspection InspectShardIndex(const ShardIndex& index, const std::vector<std::string>& rules) {
  Inspection inspection{.kind = InspectedKind::kShardDirectory,
                        .columns = {"name", "dtype", "shape", "bytes", "spec"},
                        .facts = {{"world_size", absl::StrCat(index.world_size)},
                                  {"src_rank", absl::StrCat(index.src_rank)},
                                  {"strategy", std::string(WrittenByName(index.written_by))}},
                        .metadata = index.metadata};
  if (!rules.empty()) inspection.columns.push_back("rule");
  for (int64_t rank = 0; rank < index.world_size; ++rank) {
    inspection.columns.push_back(absl::StrCat("rank ", rank));
  }
  for (size_t p = 0; p < index.parameters.size(); ++p) {
    const IndexParameter& parameter = index.parameters[p];
    std::vector<std::string> row = {parameter.name, std::string(SafetensorsName(parameter.dtype)),
                                    ShapeToString(parameter.shape),
                                    NBytes(parameter.shape, parameter.dtype),
                                    DescribeSpec(parameter)};
    if (!rules.empty()) row.push_back(rules[p]);
    std::vector<std::string> shards = ShardsPerRank(parameter, index.world_size);
    row.insert(row.end(), shards.begin(), shards.end());
    inspection.rows.push_back(std::move(row));
  }
  return inspection;
}

absl::StatusOr<Inspection> InspectPath(const std::string& path,
                                       std::vector<std::string>* warnings) {
  std::vector<std::string> ignored;
  if (warnings == nullptr) warnings = &ignored;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    SHARDKIT_ASSIGN_OR_RETURN(CheckpointPath where, ResolveCheckpointPath(path));
    return InspectCheckpoint(where, warnings);
  }
  absl::StatusOr<CheckpointPath> where = ResolveCheckpointPath(path);
  // A directory that is neither a shard directory nor a checkpoint: say what a shard directory
  // lacks, as before, when it holds no checkpoint file at all.
  if (where.ok() && where->kind == CheckpointKind::kDcpDirectory) {
    return dcp::IsDcpDirectory(path) ? InspectDcp(path) : InspectHfSharded(path);
  }
  if (!where.ok() || where->kind == CheckpointKind::kShardDirectory) return InspectDirectory(path);
  return InspectCheckpoint(*where, warnings);
}

}  // namespace shardkit::checkpoint
