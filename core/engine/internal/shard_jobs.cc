#include "core/engine/internal/shard_jobs.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "specs/parameter_layout.h"
#include "specs/spec_json.h"

namespace shardkit::internal {
namespace {

using Json = nlohmann::json;

// Why this backend cannot move `job`'s memory (the source's tensor, or a placement's device), or
// "" when it can. A capability of the backend, not a disagreement: every rank that checks the same
// placement finds the same. The message names the parameter itself.
std::string DeviceProblem(const ShardJob& job, const Communicator& comm, bool is_source) {
  const auto problem = [&](const Device& device, const std::string& where) {
    return absl::StrCat("backend ", comm.backend(), " cannot move ", device.ToString(),
                        " memory: parameter ", QuoteName(job.name), " ", where,
                        " (a capability of the backend, not a disagreement)");
  };
  if (is_source && !comm.SupportsDevice(job.source->device())) {
    return problem(job.source->device(),
                   absl::StrCat("is on ", job.source->device().ToString(), " on the source rank"));
  }
  for (const specs::ShardMetadata& shard : job.shards) {
    const auto& device = shard.placement.device();
    if (device && !comm.SupportsDevice(*device)) {
      return problem(*device, absl::StrCat("is placed on ", shard.placement.ToString()));
    }
  }
  return "";
}

// Where this rank's shards of `job` land: their placements' device (one block receives them all,
// so it must be the same for every shard of the rank), else comm.DefaultDevice().
absl::StatusOr<Device> LandingDevice(const ShardJob& job, const Communicator& comm) {
  std::optional<Device> device;
  for (const specs::ShardMetadata& shard : job.shards) {
    if (shard.placement.rank() != comm.rank()) continue;
    const Device here = PlacementDevice(shard.placement, comm);
    if (device && *device != here) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", comm.rank(), " holds shards on both ", device->ToString(), " and ",
                       here.ToString(), "; a rank's shards of one parameter share one device"));
    }
    device = here;
  }
  return device.value_or(comm.DefaultDevice());
}

// The layout of the last (spec, shape) laid out: a plan's parameters mostly share both, and laying
// out (binding, canonical JSON, fingerprint) is most of a parameter's local check.
class LayoutCache {
 public:
  absl::StatusOr<specs::ParameterLayout> LayOut(const std::optional<specs::ShardingSpec>& spec,
                                                const Shape& shape, int world) {
    if (last_.has_value() && last_->spec == spec && last_->shape == shape) return last_->layout;
    absl::StatusOr<specs::ParameterLayout> layout = specs::LayOutParameter(spec, shape, world);
    if (layout.ok()) last_ = Entry{spec, shape, *layout};
    return layout;
  }

 private:
  struct Entry {
    std::optional<specs::ShardingSpec> spec;
    Shape shape;
    specs::ParameterLayout layout;
  };
  std::optional<Entry> last_;
};

absl::Status CheckJob(ShardJob& job, const std::optional<specs::ShardingSpec>& spec,
                      const Module& module, const Communicator& comm, const ShardOptions& options,
                      bool layout_only, LayoutCache& layouts) {
  SHARDKIT_ASSIGN_OR_RETURN(job.source, module.GetTensor(job.name));
  job.shape = job.source->shape();
  job.dtype = job.source->dtype();
  job.requires_grad = job.source->requires_grad();
  const int world = comm.world_size();
  // Lay out first: the descriptor then carries the bound form even if a later check fails here
  // (the unbound form if laying out fails).
  absl::StatusOr<specs::ParameterLayout> laid_out = layouts.LayOut(spec, job.shape, world);
  if (!laid_out.ok()) {
    if (spec) job.spec_json = specs::CanonicalJson(*spec);
    return laid_out.status();
  }
  specs::ParameterLayout& layout = *laid_out;
  job.spec_json = std::move(layout.canonical_json);
  if (spec) {
    job.bound = *std::move(layout.spec);
    job.shards = std::move(layout.shards);
  }
  if (options.src_rank < 0 || options.src_rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("src_rank ", options.src_rank, " is outside the group of ", world, " ranks"));
  }
  if (options.strategy != Strategy::kScatter && options.strategy != Strategy::kBroadcast &&
      !layout_only) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy \"", std::string(specs::StrategyName(options.strategy)),
        "\" has every rank read its own shards from files ('shardkit shard --strategy direct', "
        "'shardkit reshard'); a tensor in memory is sent with \"scatter\" or \"broadcast\""));
  }
  // With layout_only no tensor data moves through the engine: the source's tensor is not read.
  const bool is_source = comm.rank() == options.src_rank && !layout_only;
  if (is_source && job.source->is_meta()) {
    return absl::InvalidArgumentError("the source rank holds a meta tensor (no data to send)");
  }
  if (is_source && !job.source->IsContiguous()) {
    return absl::InvalidArgumentError("is not a contiguous Tensor on the source rank");
  }
  return absl::OkStatus();
}

// Where this rank's shards land, and (scatter delivers a non-source rank's shards straight into
// one block allocated up front) that block: an allocation failure is a local error that every
// rank learns in the agreement.
absl::Status AllocateReceive(ShardJob& job, const Communicator& comm, const ShardOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(job.device, LandingDevice(job, comm));
  if (job.replicated || options.strategy != Strategy::kScatter || comm.rank() == options.src_rank) {
    return absl::OkStatus();
  }
  const auto by_rank = ShardIndicesByRank(job.shards, comm.world_size());
  const int64_t bytes =
      PackedBytes(job.shards, by_rank[static_cast<size_t>(comm.rank())], job.dtype);
  SHARDKIT_ASSIGN_OR_RETURN(job.recv_storage,
                            Storage::Allocate(job.device, static_cast<size_t>(bytes)));
  return absl::OkStatus();
}

}  // namespace

std::vector<ShardJob> PrepareJobs(const Module& module,
                                  const std::vector<ParameterSpec>& parameters,
                                  const Communicator& comm, const ShardOptions& options,
                                  bool layout_only) {
  std::vector<ShardJob> jobs;
  absl::flat_hash_set<std::string> seen;
  LayoutCache layouts;
  for (const ParameterSpec& parameter : parameters) {
    ShardJob& job = jobs.emplace_back();
    job.name = parameter.name;
    job.replicated = !parameter.spec.has_value();
    job.spec_json = specs::kReplicatedJson;
    absl::Status status =
        seen.insert(job.name).second
            ? CheckJob(job, parameter.spec, module, comm, options, layout_only, layouts)
            : absl::InvalidArgumentError("is listed twice");
    // With layout_only nothing is placed in memory here (the caller writes files, say), so
    // placements' devices are recorded as written, whatever this backend moves.
    if (status.ok() && !layout_only) {
      job.error = DeviceProblem(job, comm, comm.rank() == options.src_rank);
      if (!job.error.empty()) continue;
      status = AllocateReceive(job, comm, options);
      // A check's failure is an invalid argument, whatever its code; an allocation keeps its own.
      if (!status.ok()) job.error_code = status.code();
    }
    if (!status.ok()) {
      job.error = absl::StrCat("parameter ", QuoteName(job.name), ": ", status.message());
      job.recv_storage.reset();
    }
  }
  return jobs;
}

Json Describe(const std::vector<ShardJob>& jobs, const ShardOptions& options, int world_size) {
  Json order = Json::array();
  Json parameters = Json::object();
  for (const ShardJob& job : jobs) {
    order.push_back(job.name);
    parameters[job.name] = {{"spec", job.spec_json},
                            {"shape", job.shape},
                            {"dtype", DTypeName(job.dtype)},
                            {"requires_grad", job.requires_grad}};
  }
  return {{"src_rank", options.src_rank},
          {"strategy", specs::StrategyName(options.strategy)},
          {"world_size", world_size},
          {"order", order},
          {"parameters", parameters}};
}

std::vector<std::string> LocalErrors(const std::vector<ShardJob>& jobs) {
  std::vector<std::string> errors;
  for (const ShardJob& job : jobs) {
    if (!job.error.empty()) errors.push_back(job.error);
  }
  return errors;
}

absl::StatusCode LocalErrorCode(const std::vector<ShardJob>& jobs) {
  for (const ShardJob& job : jobs) {
    if (!job.error.empty()) return job.error_code;
  }
  return absl::StatusCode::kInvalidArgument;
}

absl::StatusOr<std::byte*> PackBuffer::Reserve(size_t bytes, const Device& device) {
  if (storage_ == nullptr || storage_->nbytes() < bytes || storage_->device() != device) {
    storage_.reset();  // uninitialised: packing writes every byte it sends
    SHARDKIT_ASSIGN_OR_RETURN(storage_, Storage::Allocate(device, bytes));
  }
  return static_cast<std::byte*>(storage_->data());
}

}  // namespace shardkit::internal
