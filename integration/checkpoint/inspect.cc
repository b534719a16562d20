#include "integration/checkpoint/inspect.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/text_table.h"
#include "integration/checkpoint/source/checkpoint_source.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/shard_dir/rank_files.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::checkpoint {
namespace {

using Row = TableRow;

void AppendMetadata(const std::map<std::string, std::string>& metadata, std::vector<Row>& rows) {
  for (const auto& [key, value] : metadata) rows.push_back({"metadata", key, value});
}

std::string NBytes(const Shape& shape, DType dtype) {
  return absl::StrCat(ComputeShapeSize(shape, dtype)->nbytes);
}

absl::StatusOr<std::string> InspectCheckpoint(const CheckpointPath& where,
                                              std::vector<std::string>* warnings) {
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::Open(where, warnings));
  std::vector<safetensors::TensorInfo> tensors = source.header().tensors;
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<Row> rows = {{"name", "dtype", "shape", "bytes"}};
  for (const safetensors::TensorInfo& info : tensors) {
    rows.push_back({info.name, std::string(SafetensorsName(info.dtype)), ShapeToString(info.shape),
                    NBytes(info.shape, info.dtype)});
  }
  std::string out = FormatTable(rows);
  std::vector<Row> metadata;
  AppendMetadata(source.header().metadata, metadata);
  if (where.kind == CheckpointKind::kIndex) {  // the files of the index, in their order
    for (size_t f = 0; f < source.file_count(); ++f) {
      metadata.push_back({"file", source.file_path(f)});
    }
  }
  if (!metadata.empty()) absl::StrAppend(&out, "\n", FormatTable(metadata));
  return out;
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
Row ShardsPerRank(const IndexParameter& parameter, int64_t world_size) {
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(world_size));
  for (const IndexShard& shard : parameter.shards) {
    cells[static_cast<size_t>(shard.metadata.placement.rank())].push_back(
        ShapeToString(shard.metadata.sizes));
  }
  Row row;
  for (const auto& cell : cells) row.push_back(cell.empty() ? "-" : absl::StrJoin(cell, "+"));
  return row;
}

absl::StatusOr<std::string> InspectDirectory(const std::string& dir) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardIndex index, ReadIndex(dir));
  SHARDKIT_RETURN_IF_ERROR(OpenRankFiles(dir, index).status());
  return FormatShardIndex(index);
}

}  // namespace

std::string FormatShardIndex(const ShardIndex& index, const std::vector<std::string>& rules) {
  Row header = {"name", "dtype", "shape", "bytes", "spec"};
  if (!rules.empty()) header.push_back("rule");
  for (int64_t rank = 0; rank < index.world_size; ++rank) {
    header.push_back(absl::StrCat("rank ", rank));
  }
  std::vector<Row> rows = {header};
  for (size_t p = 0; p < index.parameters.size(); ++p) {
    const IndexParameter& parameter = index.parameters[p];
    Row row = {parameter.name, std::string(SafetensorsName(parameter.dtype)),
               ShapeToString(parameter.shape), NBytes(parameter.shape, parameter.dtype),
               DescribeSpec(parameter)};
    if (!rules.empty()) row.push_back(rules[p]);
    Row shards = ShardsPerRank(parameter, index.world_size);
    row.insert(row.end(), shards.begin(), shards.end());
    rows.push_back(std::move(row));
  }
  std::vector<Row> facts = {{"world_size", absl::StrCat(index.world_size)},
                            {"src_rank", absl::StrCat(index.src_rank)},
                            {"strategy", std::string(WrittenByName(index.written_by))}};
  AppendMetadata(index.metadata, facts);
  return absl::StrCat(FormatTable(rows), "\n", FormatTable(facts));
}

absl::StatusOr<std::string> InspectPath(const std::string& path,
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
  if (!where.ok() || where->kind == CheckpointKind::kShardDirectory) return InspectDirectory(path);
  return InspectCheckpoint(*where, warnings);
}

}  // namespace shardkit::checkpoint
