#include "core/engine/shard_parameter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/internal/descriptor_agreement.h"
#include "core/engine/internal/shard_jobs.h"
#include "specs/parameter_layout.h"

namespace shardkit {
namespace {

// Measures the steps of one call into ShardStats, when requested.
class StepTimer {
 public:
  explicit StepTimer(ShardStats* stats) : stats_(stats), start_(absl::Now()) {
    if (stats_ != nullptr) *stats_ = ShardStats();
  }
  // Sets `field` to the time since the last lap (or the start); returns now.
  absl::Time Lap(double ShardStats::*field) {
    const absl::Time now = absl::Now();
    if (stats_ != nullptr) stats_->*field = absl::ToDoubleSeconds(now - start_);
    start_ = now;
    return now;
  }
  void Mark(absl::Time ShardStats::*field, absl::Time when) {
    if (stats_ != nullptr) stats_->*field = when;
  }

 private:
  ShardStats* stats_;
  absl::Time start_;
};

// Where a failed operation was in time, for its transport errors: "<step>, 1.204 s into an
// operation with a 1.200 s deadline". kInvalidArgument (disagreement or bad input, the same
// verdict on every rank) is left as it is.
class OperationClock {
 public:
  explicit OperationClock(absl::Time deadline) : start_(absl::Now()), deadline_(deadline) {}

  absl::Status Annotate(const absl::Status& status, std::string_view step) const {
    if (status.ok() || absl::IsInvalidArgument(status)) return status;
    return shardkit::Annotate(
        status, absl::StrFormat("%s, %.3f s into an operation with a %.3f s deadline", step,
                                absl::ToDoubleSeconds(absl::Now() - start_),
                                absl::ToDoubleSeconds(deadline_ - start_)));
  }

  // The result of a round that agrees on every rank's errors: while `comm` is usable it is every
  // rank's same verdict (one rank's time in it would make the ranks' messages differ) and is
  // returned as it is; the round's own transport failure poisons `comm` and is annotated.
  absl::Status AnnotateRound(const absl::Status& status, std::string_view step,
                             const Communicator& comm) const {
    return comm.poisoned().ok() ? status : Annotate(status, step);
  }

 private:
  const absl::Time start_;
  const absl::Time deadline_;
};

}  // namespace

absl::Status ShardParameter(Module& module, std::string_view name, const specs::ShardingSpec& spec,
                            Communicator& comm, const ShardOptions& options) {
  return ShardParameters(module, {ParameterSpec{std::string(name), spec}}, comm, options);
}

absl::Status ShardParameters(Module& module, const std::vector<ParameterSpec>& parameters,
                             Communicator& comm, const ShardOptions& requested) {
  StepTimer timer(requested.stats);
  // One deadline for the whole operation: agreement, transfers and commit share it.
  ShardOptions options = requested;
  options.call.deadline = comm.Deadline(requested.call);
  const OperationClock clock(options.call.deadline);
  std::vector<internal::ShardJob> jobs = internal::PrepareJobs(module, parameters, comm, options);
  // Whatever can fail on this rank alone (allocating, packing, copying its own shards) is done
  // before the agreement, which makes it every rank's same error before a byte moves.
  std::vector<std::string> local_errors = internal::LocalErrors(jobs);
  absl::StatusCode local_code = internal::LocalErrorCode(jobs);
  internal::PreparedTransfer prepared;
  if (local_errors.empty()) {
    absl::Status ready = internal::PrepareTransfer(jobs, comm, options, prepared);
    if (!ready.ok()) {
      local_errors.emplace_back(ready.message());
      local_code = ready.code();
    }
  }
  timer.Mark(&ShardStats::agree_begin, timer.Lap(&ShardStats::check_seconds));
  SHARDKIT_RETURN_IF_ERROR(clock.AnnotateRound(
      internal::AgreeOnDescriptor(comm, internal::Describe(jobs, options, comm.world_size()),
                                  local_errors, "ShardParameter", options.call, local_code),
      "ShardParameter agreement", comm));
  timer.Mark(&ShardStats::agree_end, timer.Lap(&ShardStats::agree_seconds));
  absl::StatusOr<std::vector<internal::ShardResult>> transferred =
      internal::TransferJobs(jobs, comm, options, prepared);
  absl::Status local = absl::OkStatus();
  if (!transferred.ok()) {
    local = clock.Annotate(transferred.status(), "transfer");
    // A poisoned communicator cannot carry the news; otherwise the commit round does.
    if (!comm.poisoned().ok()) return local;
  } else {
    timer.Lap(&ShardStats::transfer_seconds);
  }
  SHARDKIT_RETURN_IF_ERROR(
      clock.AnnotateRound(AgreeOnStatus(comm, local, "ShardParameter commit", options.call),
                          "ShardParameter commit", comm));
  std::vector<internal::ShardResult>& results = *transferred;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (auto* sharded = std::get_if<ShardedTensor>(&results[i])) {
      SHARDKIT_RETURN_IF_ERROR(module.SetSharded(jobs[i].name, std::move(*sharded)));
    } else {
      SHARDKIT_RETURN_IF_ERROR(module.SetTensor(jobs[i].name, std::get<Tensor>(results[i])));
    }
  }
  timer.Lap(&ShardStats::commit_seconds);
  return absl::OkStatus();
}

namespace {

// The parameters of `module` with the spec of the first rule of `plan` that matches (or none:
// replicated), and `options` with the plan's src_rank and strategy unless `overrides` set them.
std::vector<ParameterSpec> ApplyPlan(const Module& module, const specs::Plan& plan) {
  std::vector<ParameterSpec> parameters;
  for (const std::string& name : module.names()) {
    std::optional<size_t> rule = specs::MatchRule(plan, name);
    parameters.push_back({name, rule ? std::optional(plan.rules[*rule].spec) : std::nullopt});
  }
  return parameters;
}

ShardOptions ResolveOptions(const specs::Plan& plan, const PlanOverrides& overrides,
                            const ShardOptions& options) {
  ShardOptions resolved = options;
  resolved.src_rank = overrides.src_rank.value_or(static_cast<int>(plan.src_rank));
  resolved.strategy = overrides.strategy.value_or(plan.strategy);
  return resolved;
}

}  // namespace

absl::Status ShardModule(Module& module, const specs::Plan& plan, Communicator& comm,
                         const PlanOverrides& overrides, const ShardOptions& options) {
  return ShardParameters(module, ApplyPlan(module, plan), comm,
                         ResolveOptions(plan, overrides, options));
}

absl::StatusOr<std::vector<AgreedParameter>> AgreeOnParameters(
    const Module& module, const std::vector<ParameterSpec>& parameters, Communicator& comm,
    const ShardOptions& requested) {
  ShardOptions options = requested;
  options.call.deadline = comm.Deadline(requested.call);
  const OperationClock clock(options.call.deadline);
  std::vector<internal::ShardJob> jobs =
      internal::PrepareJobs(module, parameters, comm, options, /*layout_only=*/true);
  SHARDKIT_RETURN_IF_ERROR(clock.AnnotateRound(
      internal::AgreeOnDescriptor(comm, internal::Describe(jobs, options, comm.world_size()),
                                  internal::LocalErrors(jobs), "ShardParameter", options.call,
                                  internal::LocalErrorCode(jobs)),
      "ShardParameter agreement", comm));
  std::vector<AgreedParameter> agreed;
  for (size_t i = 0; i < jobs.size(); ++i) {
    internal::ShardJob& job = jobs[i];
    AgreedParameter& out = agreed.emplace_back();
    out.name = job.name;
    out.shape = job.shape;
    out.dtype = job.dtype;
    out.spec_json = job.spec_json;
    if (!job.replicated) {
      out.spec = std::move(job.bound);
      out.shards = std::move(job.shards);
      continue;
    }
    SHARDKIT_ASSIGN_OR_RETURN(specs::ParameterLayout layout,
                              specs::LayOutParameter(std::nullopt, job.shape, comm.world_size()));
    out.shards = std::move(layout.shards);
  }
  return agreed;
}

absl::StatusOr<std::vector<AgreedParameter>> AgreeOnPlan(const Module& module,
                                                         const specs::Plan& plan,
                                                         Communicator& comm,
                                                         const PlanOverrides& overrides,
                                                         const ShardOptions& options) {
  return AgreeOnParameters(module, ApplyPlan(module, plan), comm,
                           ResolveOptions(plan, overrides, options));
}

}  // namespace shardkit
