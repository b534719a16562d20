// DryRun: `shardkit spec check PLAN --checkpoint CK --world N` as a library — the plan bound to a
// checkpoint's header as `shardkit shard` would bind it on N ranks, in one process, with the same
// functions (plan_binding.h): only headers are read, nothing is written, no rank is started.
//
//   std::vector<std::string> warnings;
//   SHARDKIT_ASSIGN_OR_RETURN(Inspection table,
//                             DryRun({.plan_path = "plan.json", .checkpoint_path = "model",
//                                     .world_size = 8}, &warnings));
//
// CK is any checkpoint `shard --checkpoint` takes (a safetensors file, a Hugging Face index, a
// directory holding one), or a shard directory — then the plan is bound as `shardkit reshard`
// binds it (its src_rank and strategy ignored, with a warning), its rank files' headers read.
// The result is what `shardkit inspect` would show of the output directory (InspectShardIndex,
// inspect.h), with a `rule` column: the rule that laid the parameter out (`rules[2]`), or `-`
// (replicated).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_DRY_RUN_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_DRY_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/fp8_scales.h"
#include "integration/checkpoint/inspect.h"

namespace shardkit::checkpoint {

struct DryRunOptions {
  std::string plan_path;
  std::string plan_json;  // the plan's text instead of plan_path's file (which then names it)
  std::string checkpoint_path;
  int64_t world_size = 1;
  bool strict = false;                 // as ShardWriteOptions::strict
  bool allow_replicated_only = false;  // as ShardWriteOptions::allow_replicated_only
  Fp8ScaleOptions fp8;
};

// The warnings `shard` would print (the checkpoint's, the plan's idle rules, the FP8 check's) are
// appended to `warnings`. Errors: those `shard` would report before moving data, with the same
// messages — kNotFound / kInvalidArgument for a missing or malformed plan or checkpoint, a name
// with '#' or that the engine refuses, src_rank outside the world, a spec that does not fit its
// tensor (an enumerable spec's gap or overlap), a plan that shards nothing (unless
// allow_replicated_only), under `strict` idle rules, an FP8 weight cut off its scale blocks, a
// sub-byte shard cut inside a byte.
[[nodiscard]] absl::StatusOr<Inspection> DryRun(const DryRunOptions& options,
                                                std::vector<std::string>* warnings);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_DRY_RUN_H_
