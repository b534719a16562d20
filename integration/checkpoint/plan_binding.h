// Binding a plan to a checkpoint's header: what `shardkit shard` and `reshard` do on every rank
// once the source's header has arrived, and what `shardkit spec check --checkpoint` (the dry run,
// dry_run.h) does alone — the same functions, so that the dry run says what `shard` would.
//
//   std::vector<std::string> warnings;
//   SHARDKIT_ASSIGN_OR_RETURN(specs::Plan plan, ReadPlanFile("plan.json", false, &warnings));
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<specs::ResolvedParameter> resolved,
//                             BindPlan(plan, header, world, {.plan_path = "plan.json"},
//                             &warnings));
//   // shard: the ranks agree on the layouts (AgreeOnPlan) ...
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<StreamTensor> tensors,
//                             CheckLayouts(header, std::move(agreed), fp8, &warnings));
//
// Every verdict here depends only on the plan, the header and the world size: ranks that agree
// on those reach the same one, with the same message.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_PLAN_BINDING_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_PLAN_BINDING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/shard_parameter.h"
#include "integration/checkpoint/fp8_scales.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/formats/safetensors/safetensors.h"
#include "specs/plan.h"

namespace shardkit::checkpoint {

// Parses the plan `json_text`, which `name` names in errors and warnings. For `reshard` its
// src_rank and strategy do not apply: they become 0 and direct, and a plan that sets either gets a
// warning ("warning: NAME: src_rank does not apply to reshard (ignored: ...)") appended to
// `warnings`. Errors: kInvalidArgument as specs::ParsePlan, naming `name`.
[[nodiscard]] absl::StatusOr<specs::Plan> ParsePlanText(std::string_view json_text,
                                                        const std::string& name, bool reshard,
                                                        std::vector<std::string>* warnings);

// ParsePlanText of the file at `path` (named by it), or of `json_text` when it is not empty (a
// program's plan; `path` then only names it).
// Errors: also kNotFound / kInvalidArgument as os::ReadWholeFile, naming `path`.
[[nodiscard]] absl::StatusOr<specs::Plan> ReadPlanFile(const std::string& path, bool reshard,
                                                       std::vector<std::string>* warnings,
                                                       std::string_view json_text = {});

struct PlanCheckOptions {
  std::string plan_path;  // names the plan in messages
  // --strict: a rule that matches no parameter and a rule shadowed by earlier ones (every
  // parameter it matches was taken first) are errors, not warnings.
  bool strict = false;
  // --allow-replicated-only: a plan that shards nothing (every parameter replicated on every rank)
  // is what the caller wants; without it, such a plan is an error.
  bool allow_replicated_only = false;
};

// Binds `plan` to the header's tensors for `world_size` ranks: checks every name (no '#',
// CheckNoShardSuffix; a name a Module takes, ValidateParameterName), resolves the plan
// (specs::Resolve: first match wins, every spec laid out on its tensor's shape), then looks for
// idle rules (specs::FindIdleRules). Each idle rule is a warning appended to `warnings`: `warning:
// PLAN: rules[2] ("x.*") matches no parameter of the checkpoint`, or `warning: PLAN: rules[4]
// ("a.*.o_proj") matches 4 parameters, all taken by rules[0] ("a.*.*_proj")`. Returns one entry per
// header tensor, in header order. Errors: kInvalidArgument for a name with '#' or that a Module
// refuses, as specs::Resolve (naming the parameter and rule), for a plan that shards nothing
// (every parameter replicated) unless `allow_replicated_only`, and under `strict` for idle rules:
// one message listing them all, `PLAN: --strict: rules[4] (...) matches 4 parameters, ...; ...`.
[[nodiscard]] absl::StatusOr<std::vector<specs::ResolvedParameter>> BindPlan(
    const specs::Plan& plan, const safetensors::Header& header, int64_t world_size,
    const PlanCheckOptions& options, std::vector<std::string>* warnings);

// The parameters of `resolved` (header order) as AgreeOnPlan returns them: for a caller that
// binds the plan alone (the dry run), with no ranks to agree with.
std::vector<AgreedParameter> AsAgreed(const safetensors::Header& header,
                                      const std::vector<specs::ResolvedParameter>& resolved);

// The checks on the agreed layouts (`agreed`: one per header tensor, in header order): FP8
// weights and their block scales cut alike (CheckFp8Scales; its warnings appended to `warnings`),
// then every sub-byte tensor's shards on byte boundaries (MakeStreamTensor). Returns the tensors
// to stream, header order, source_index set. Errors: kInvalidArgument as CheckFp8Scales and
// MakeStreamTensor, naming the tensors and the shard.
[[nodiscard]] absl::StatusOr<std::vector<StreamTensor>> CheckLayouts(
    const safetensors::Header& header, std::vector<AgreedParameter> agreed,
    const Fp8ScaleOptions& fp8, std::vector<std::string>* warnings);

// What index.json says about the output of `resolved` (header order): parameters sorted by name,
// each with its layout's files and tensor names (MakeIndexParameter).
ShardIndex MakeShardIndex(int64_t world_size, int64_t src_rank, WrittenBy written_by,
                          const safetensors::Header& header,
                          const std::vector<specs::ResolvedParameter>& resolved);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_PLAN_BINDING_H_
