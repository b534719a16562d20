#include "integration/checkpoint/spec_check.h"

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "specs/fingerprint.h"
#include "specs/layout.h"
#include "specs/plan.h"
#include "specs/sharding_spec.h"
#include "specs/spec_json.h"

namespace shardkit::checkpoint {
namespace {

void SetCanonical(std::string canonical, SpecCheck* check) {
  check->fingerprint = specs::Fingerprint(canonical);
  check->canonical = std::move(canonical);
}

absl::Status CheckSpec(const specs::ShardingSpec& spec, const SpecCheckOptions& options,
                       SpecCheck* check) {
  if (!options.shape.has_value()) {
    if (options.world.has_value()) {
      SHARDKIT_RETURN_IF_ERROR(specs::ValidateRanks(spec, *options.world));
    }
    SetCanonical(specs::CanonicalJson(spec), check);
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(specs::BoundSpec bound,
                            specs::BindWithShards(spec, *options.shape, options.world));
  SetCanonical(specs::CanonicalJson(bound.spec), check);
  check->shards = std::move(bound.shards);
  return absl::OkStatus();
}

absl::Status CheckPlan(const specs::Plan& plan, const SpecCheckOptions& options, SpecCheck* check) {
  check->plan = true;
  if (options.shape.has_value()) {
    return absl::InvalidArgumentError(
        "--shape applies to a spec, not to a plan (its rules cover many parameters)");
  }
  if (options.world.has_value()) {
    if (plan.src_rank >= *options.world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "src_rank ", plan.src_rank, " is outside the world of ", *options.world, " ranks"));
    }
    for (size_t i = 0; i < plan.rules.size(); ++i) {
      SpecCheck rule;
      SHARDKIT_RETURN_IF_ERROR(Annotate(CheckSpec(plan.rules[i].spec, options, &rule),
                                        absl::StrCat("rules[", i, "].spec")));
    }
  }
  SetCanonical(specs::CanonicalJson(plan), check);
  return absl::OkStatus();
}

// A dry run needs a world and takes no shape (checked before the file is read).
absl::Status CheckDryRunOptions(const SpecCheckOptions& options) {
  if (options.shape.has_value()) {
    return absl::InvalidArgumentError(
        "--shape and --checkpoint exclude each other (the checkpoint gives every shape)");
  }
  if (!options.world.has_value()) {
    return absl::InvalidArgumentError(
        "--world is required with --checkpoint (the number of ranks the plan is laid out for)");
  }
  return absl::OkStatus();
}

// The dry run of `shard` (DryRun) of a plan, whose text `text` was read already.
absl::Status CheckDryRun(const specs::SpecOrPlan& parsed, const std::string& text,
                         const SpecCheckOptions& options, std::vector<std::string>* warnings,
                         SpecCheck* check) {
  if (!std::holds_alternative<specs::Plan>(parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.path, ": --checkpoint applies to a plan (an object with \"rules\"), not a spec"));
  }
  check->plan = true;
  DryRunOptions dry_run = options.dry_run;
  dry_run.plan_path = options.path;
  dry_run.plan_json = text;  // not read from the file a second time
  dry_run.world_size = *options.world;
  SHARDKIT_ASSIGN_OR_RETURN(check->dry_run, DryRun(dry_run, warnings));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SpecCheck> CheckSpecFile(const SpecCheckOptions& options,
                                        std::vector<std::string>* warnings) {
  const bool dry_run = !options.dry_run.checkpoint_path.empty();
  if (dry_run) SHARDKIT_RETURN_IF_ERROR(CheckDryRunOptions(options));
  std::string text = options.json_text;
  if (text.empty()) {
    SHARDKIT_ASSIGN_OR_RETURN(text, os::ReadWholeFile(options.path));
  }
  absl::StatusOr<specs::SpecOrPlan> parsed = specs::ParseSpecOrPlan(text);
  if (!parsed.ok()) return Annotate(parsed.status(), options.path);
  SpecCheck check;
  if (dry_run) {
    SHARDKIT_RETURN_IF_ERROR(CheckDryRun(*parsed, text, options, warnings, &check));
    return check;
  }
  const absl::Status status =
      std::holds_alternative<specs::Plan>(*parsed)
          ? CheckPlan(std::get<specs::Plan>(*parsed), options, &check)
          : CheckSpec(std::get<specs::ShardingSpec>(*parsed), options, &check);
  if (!status.ok()) return Annotate(status, options.path);
  return check;
}

}  // namespace shardkit::checkpoint
