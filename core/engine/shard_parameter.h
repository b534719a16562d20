// ShardParameter and ShardModule: distribute a source rank's parameters so that every rank keeps
// exactly its shards, after every rank has agreed on what will happen.
//
//   ShardOptions options{.src_rank = 0, .strategy = Strategy::kScatter};
//   SHARDKIT_RETURN_IF_ERROR(ShardParameter(module, "embed.weight", spec, *comm, options));
//   // module's "embed.weight" slot now holds a ShardedTensor with this rank's shards.
//
// The data flow (docs/architecture.md, "ShardParameter and ShardModule: the data flow"):
//  1. Local checks, no I/O: the slot exists and holds a tensor (a meta tensor is fine on ranks
//     other than the source), the source's tensor has data and is contiguous, the spec binds to
//     the shape and the world, devices suit the backend; then whatever can fail on one rank
//     alone: receive storage is allocated, the source packs what it sends and copies its own
//     shards. A local failure does not return early: it is carried into step 2.
//  2. Agreement: one all-gather of fixed-size digests of {names, bound specs, shapes, dtypes,
//     requires_grad, src_rank, strategy} and of local readiness. On any difference every rank
//     returns the same kInvalidArgument naming every disagreeing rank and field (a local failure
//     alone: its own code, e.g. kResourceExhausted); no data moves.
//  3. Distribution: `kScatter` sends each rank only its shards (per-rank sizes, no padding;
//     contiguous chunks straight from the source's memory, others packed once; a rank's several
//     shards in one transfer, received straight into their final storage); `kBroadcast` sends the
//     whole tensor to every rank, which copies its chunks out of it. Replicated parameters
//     (ShardModule, no spec) are broadcast whole.
//  4. Commit: one all-gather of every rank's success; only then are the slots replaced. A failure
//     before the commit leaves the module unchanged on every rank.
// One deadline (ShardOptions::call) bounds all of it: a peer that dies or stalls makes every other
// rank return an error by then, naming the step, the ranks not heard from, the bytes moved and
// the time elapsed.
// Ranks in placements and src_rank are ranks of `comm`.
#ifndef SHARDKIT_CORE_ENGINE_SHARD_PARAMETER_H_
#define SHARDKIT_CORE_ENGINE_SHARD_PARAMETER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "specs/plan.h"
#include "specs/sharding_spec.h"

namespace shardkit {

// kScatter (default) or kBroadcast; specs::StrategyName / specs::ParseStrategy spell them.
// kDirect (ranks reading a checkpoint themselves) is refused by every call that moves tensors
// (kInvalidArgument on every rank); AgreeOnPlan accepts it.
using Strategy = specs::Strategy;

// Wall-clock seconds of each step of the last call, for benchmarks.
struct ShardStats {
  double check_seconds = 0;
  double agree_seconds = 0;
  double transfer_seconds = 0;
  double commit_seconds = 0;
  // When this rank began and ended the agreement (wall clock): on one host, the last rank's
  // begin to the last rank's end is the agreement's own latency, without the wait for late ranks.
  absl::Time agree_begin = absl::InfinitePast();
  absl::Time agree_end = absl::InfinitePast();
};

struct ShardOptions {
  int src_rank = 0;
  Strategy strategy = Strategy::kScatter;
  // The deadline of the whole operation (call.timeout from its start, or call.deadline): the
  // agreement, every transfer and the commit share it, each step getting the time that is left.
  CallOptions call;
  ShardStats* stats = nullptr;  // filled in when set
};

// One parameter of a ShardParameters call: a spec, or nullopt for "replicated" (every rank gets
// the whole tensor).
struct ParameterSpec {
  std::string name;
  std::optional<specs::ShardingSpec> spec;
};

// Collective: shards one parameter. Errors: kInvalidArgument (same on every rank) for any local
// problem or disagreement, naming ranks, parameter and field — a placement on a device the backend
// cannot move included, worded as the backend's capability ("backend gloo cannot move cuda memory:
// parameter "w" is placed on rank:1/cuda (...)"); a rank's failure to allocate or pack (e.g.
// kResourceExhausted), the same on every rank, naming that rank and the step; transport errors
// as the Communicator's (kDeadlineExceeded, kUnavailable), annotated with the step ("ShardParameter
// agreement" / "ShardParameter(NAME): transfer" / "ShardParameter commit") and the time into the
// operation, after which the communicator is poisoned.
[[nodiscard]] absl::Status ShardParameter(Module& module, std::string_view name,
                                          const specs::ShardingSpec& spec, Communicator& comm,
                                          const ShardOptions& options = {});

// Collective: validates and agrees on all `parameters` in one step, moves them in order, and
// commits them together; on failure no slot changes on any rank. Errors: as ShardParameter.
[[nodiscard]] absl::Status ShardParameters(Module& module,
                                           const std::vector<ParameterSpec>& parameters,
                                           Communicator& comm, const ShardOptions& options = {});

// Overrides of a plan's src_rank and strategy (flag > plan > default).
struct PlanOverrides {
  std::optional<int> src_rank;
  std::optional<Strategy> strategy;
};

// Collective: applies `plan` to every parameter of `module`, in module order: the first matching
// rule's spec, or replicated when no rule matches. One agreement for the whole plan, one commit.
// `options.src_rank` and `options.strategy` are ignored: they come from the plan unless
// `overrides` sets them. Errors: as ShardParameters.
[[nodiscard]] absl::Status ShardModule(Module& module, const specs::Plan& plan, Communicator& comm,
                                       const PlanOverrides& overrides = {},
                                       const ShardOptions& options = {});

// One parameter of an agreed plan (AgreeOnParameters): what a caller that moves the data itself
// (the streaming checkpoint path) needs to know about it.
struct AgreedParameter {
  std::string name;
  Shape shape;
  DType dtype = DType::kFloat32;
  // The layout: sharded, the bound spec's shards in spec order; replicated, one whole-tensor
  // shard per rank (specs::LayOutParameter).
  std::optional<specs::ShardingSpec> spec;  // bound; nullopt: replicated
  std::vector<specs::ShardMetadata> shards;
  std::string spec_json;  // bound canonical JSON, or specs::kReplicatedJson
};

// Collective: steps 1 and 2 of ShardParameters — every local check and the agreement, with the
// same errors, identical on every rank — and nothing else: no data moves and the module is not
// changed. Every slot may hold a meta tensor (on the source too): the caller moves the data, so
// placements' devices are not checked against the backend (a file records them as written: a
// `cuda` plan is agreed over Gloo).
// Returns the parameters in `parameters` order. Errors: as ShardParameters' agreement.
[[nodiscard]] absl::StatusOr<std::vector<AgreedParameter>> AgreeOnParameters(
    const Module& module, const std::vector<ParameterSpec>& parameters, Communicator& comm,
    const ShardOptions& options = {});

// AgreeOnParameters for a plan applied to every parameter of `module`, as ShardModule applies it.
[[nodiscard]] absl::StatusOr<std::vector<AgreedParameter>> AgreeOnPlan(
    const Module& module, const specs::Plan& plan, Communicator& comm,
    const PlanOverrides& overrides = {}, const ShardOptions& options = {});

}  // namespace shardkit

#endif  // SHARDKIT_CORE_ENGINE_SHARD_PARAMETER_H_
