#include "integration/checkpoint/plan_binding.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/engine/module.h"
#include "core/json/json_reader.h"
#include "core/os/files.h"

namespace shardkit::checkpoint {
namespace {

// Why the plan would shard nothing, or "" when some parameter takes a rule (or when asked to).
std::string ShardsNothing(const std::vector<specs::ResolvedParameter>& resolved,
                          bool allow_replicated_only) {
  if (allow_replicated_only) return "";
  const std::string nothing = specs::DescribeShardsNothing(resolved);
  if (nothing.empty()) return "";
  return absl::StrCat(nothing,
                      " of the checkpoint, so every rank would get every one whole "
                      "(--allow-replicated-only if that is what you want)");
}

}  // namespace

absl::StatusOr<specs::Plan> ParsePlanText(std::string_view json_text, const std::string& name,
                                          bool reshard, std::vector<std::string>* warnings) {
  absl::StatusOr<specs::Plan> plan = specs::ParsePlan(json_text);
  if (!plan.ok()) return Annotate(plan.status(), name);
  if (!reshard) return plan;
  absl::StatusOr<json::Json> json = json::ParseJson(json_text);  // valid: ParsePlan took it
  for (const char* key : {"src_rank", "strategy"}) {
    if (json.ok() && json->contains(key)) {
      warnings->push_back(absl::StrCat("warning: ", name, ": ", key,
                                       " does not apply to reshard (ignored: every rank reads "
                                       "its own shards, rank 0 writes index.json)"));
    }
  }
  plan->src_rank = 0;
  plan->strategy = specs::Strategy::kDirect;
  return plan;
}

absl::StatusOr<specs::Plan> ReadPlanFile(const std::string& path, bool reshard,
                                         std::vector<std::string>* warnings,
                                         std::string_view json_text) {
  if (!json_text.empty()) return ParsePlanText(json_text, path, reshard, warnings);
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, os::ReadWholeFile(path));
  return ParsePlanText(text, path, reshard, warnings);
}

absl::StatusOr<std::vector<specs::ResolvedParameter>> BindPlan(const specs::Plan& plan,
                                                               const safetensors::Header& header,
                                                               int64_t world_size,
                                                               const PlanCheckOptions& options,
                                                               std::vector<std::string>* warnings) {
  std::vector<specs::ParameterInfo> infos;
  infos.reserve(header.tensors.size());
  for (const safetensors::TensorInfo& info : header.tensors) {
    SHARDKIT_RETURN_IF_ERROR(CheckNoShardSuffix(info.name));
    SHARDKIT_RETURN_IF_ERROR(ValidateParameterName(info.name));  // the Module's, in one place
    infos.push_back({info.name, info.shape});
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<specs::ResolvedParameter> resolved,
                            specs::Resolve(plan, infos, world_size));
  std::vector<std::string> idle;
  for (const specs::IdleRule& rule : specs::FindIdleRules(plan, resolved)) {
    idle.push_back(absl::StrCat(specs::DescribeIdleRule(plan, rule),
                                rule.matches == 0 ? " of the checkpoint" : ""));
  }
  const std::string nothing = ShardsNothing(resolved, options.allow_replicated_only);
  if (!nothing.empty()) {  // an error with or without --strict: every rank would get everything
    if (options.strict) idle.push_back(nothing);
    return absl::InvalidArgumentError(absl::StrCat(
        options.plan_path, ": ",
        options.strict ? absl::StrCat("--strict: ", absl::StrJoin(idle, "; ")) : nothing));
  }
  if (!options.strict) {
    for (const std::string& line : idle) {
      warnings->push_back(absl::StrCat("warning: ", options.plan_path, ": ", line));
    }
    return resolved;
  }
  if (idle.empty()) return resolved;
  return absl::InvalidArgumentError(
      absl::StrCat(options.plan_path, ": --strict: ", absl::StrJoin(idle, "; ")));
}

std::vector<AgreedParameter> AsAgreed(const safetensors::Header& header,
                                      const std::vector<specs::ResolvedParameter>& resolved) {
  std::vector<AgreedParameter> agreed;
  agreed.reserve(resolved.size());
  for (size_t i = 0; i < resolved.size(); ++i) {
    const safetensors::TensorInfo& info = header.tensors[i];
    const specs::ParameterLayout& layout = resolved[i].layout;
    agreed.push_back(
        {info.name, info.shape, info.dtype, layout.spec, layout.shards, layout.canonical_json});
  }
  return agreed;
}

absl::StatusOr<std::vector<StreamTensor>> CheckLayouts(const safetensors::Header& header,
                                                       std::vector<AgreedParameter> agreed,
                                                       const Fp8ScaleOptions& fp8,
                                                       std::vector<std::string>* warnings) {
  std::vector<LaidOutTensor> laid_out;
  laid_out.reserve(agreed.size());
  for (const AgreedParameter& parameter : agreed) {
    laid_out.push_back({parameter.name, parameter.dtype, parameter.shape,
                        !parameter.spec.has_value(), parameter.shards});
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> fp8_warnings, CheckFp8Scales(laid_out, fp8));
  warnings->insert(warnings->end(), fp8_warnings.begin(), fp8_warnings.end());
  std::vector<StreamTensor> tensors;
  tensors.reserve(agreed.size());
  for (size_t i = 0; i < agreed.size(); ++i) {
    AgreedParameter& parameter = agreed[i];
    const safetensors::TensorInfo& info = header.tensors[i];
    // A sub-byte tensor cut inside a byte fails here, identically on every rank (agreed layout).
    SHARDKIT_ASSIGN_OR_RETURN(
        tensors.emplace_back(),
        MakeStreamTensor(info.name, info.dtype, info.shape, info.begin, info.end,
                         !parameter.spec.has_value(), std::move(parameter.shards)));
    tensors.back().source_index = i;
    tensors.back().spec_json = std::move(parameter.spec_json);
  }
  return tensors;
}

ShardIndex MakeShardIndex(int64_t world_size, int64_t src_rank, WrittenBy written_by,
                          const safetensors::Header& header,
                          const std::vector<specs::ResolvedParameter>& resolved) {
  ShardIndex index{world_size, src_rank, written_by, header.metadata, {}};
  for (size_t i = 0; i < resolved.size(); ++i) {
    const safetensors::TensorInfo& info = header.tensors[i];
    index.parameters.push_back(
        MakeIndexParameter(info.name, info.dtype, info.shape, resolved[i].layout));
  }
  std::sort(index.parameters.begin(), index.parameters.end(),
            [](const IndexParameter& a, const IndexParameter& b) { return a.name < b.name; });
  return index;
}

}  // namespace shardkit::checkpoint
