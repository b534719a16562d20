#include "integration/checkpoint/dry_run.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/plan_binding.h"
#include "integration/checkpoint/source/checkpoint_source.h"
#include "integration/checkpoint/source/saved_directory.h"

namespace shardkit::checkpoint {
namespace {

// A shard directory's rank files are opened with a staging buffer for reads; none happen here.
constexpr int64_t kNoReads = int64_t{64} << 10;

absl::StatusOr<std::unique_ptr<TensorSource>> OpenSource(const CheckpointPath& where,
                                                         std::vector<std::string>* warnings) {
  if (where.kind == CheckpointKind::kShardDirectory ||
      where.kind == CheckpointKind::kDcpDirectory) {
    SHARDKIT_ASSIGN_OR_RETURN(SavedDirectory saved, OpenSavedDirectory(where.path, kNoReads));
    return SelectSaved(saved, {}, /*items_carried=*/false, warnings);
  }
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::Open(where, warnings));
  return std::unique_ptr<TensorSource>(std::make_unique<CheckpointSource>(std::move(source)));
}

// The `rule` column: per parameter of `index` (name order), "rules[i]" or "-".
std::vector<std::string> RuleCells(const ShardIndex& index,
                                   const std::vector<specs::ResolvedParameter>& resolved) {
  absl::flat_hash_map<std::string, std::optional<size_t>> rule_of;
  for (const specs::ResolvedParameter& parameter : resolved) {
    rule_of[parameter.name] = parameter.rule;
  }
  std::vector<std::string> cells;
  cells.reserve(index.parameters.size());
  for (const IndexParameter& parameter : index.parameters) {
    const std::optional<size_t> rule = rule_of[parameter.name];
    cells.push_back(rule ? absl::StrCat("rules[", *rule, "]") : "-");
  }
  return cells;
}

}  // namespace

absl::StatusOr<Inspection> DryRun(const DryRunOptions& options,
                                  std::vector<std::string>* warnings) {
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointPath where, ResolveCheckpointPath(options.checkpoint_path));
  // A shard directory or a DCP checkpoint is laid out by `reshard --in`.
  const bool reshard =
      where.kind == CheckpointKind::kShardDirectory || where.kind == CheckpointKind::kDcpDirectory;
  SHARDKIT_ASSIGN_OR_RETURN(specs::Plan plan,
                            ReadPlanFile(options.plan_path, reshard, warnings, options.plan_json));
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<TensorSource> source, OpenSource(where, warnings));
  const safetensors::Header& header = source->header();
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<specs::ResolvedParameter> resolved,
                            BindPlan(plan, header, options.world_size,
                                     {.plan_path = options.plan_path,
                                      .strict = options.strict,
                                      .allow_replicated_only = options.allow_replicated_only},
                                     warnings));
  SHARDKIT_RETURN_IF_ERROR(
      CheckLayouts(header, AsAgreed(header, resolved), options.fp8, warnings).status());
  const ShardIndex index = MakeShardIndex(
      options.world_size, plan.src_rank,
      reshard ? WrittenBy::kReshard : WrittenByShard(plan.strategy), header, resolved);
  return InspectShardIndex(index, RuleCells(index, resolved));
}

}  // namespace shardkit::checkpoint
