// Internal: one parameter's work in ShardParameters — local checks (step 1), its descriptor for
// the agreement (step 2), and its transfer (step 3). See core/engine/shard_parameter.h.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SHARD_JOBS_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SHARD_JOBS_H_

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "nlohmann/json.hpp"
#include "specs/shard_metadata.h"

namespace shardkit::internal {

struct ShardJob {
  std::string name;
  bool replicated = false;
  const Tensor* source = nullptr;  // the slot's tensor; set when the slot holds one
  Shape shape;
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
  specs::ShardingSpec bound;                 // sharded: the spec bound to shape and world
  std::vector<specs::ShardMetadata> shards;  // sharded: the layout, in spec order
  std::string spec_json;                     // bound canonical JSON, or specs::kReplicatedJson
  std::string error;                         // this rank's local problem, or empty
  absl::StatusCode error_code = absl::StatusCode::kInvalidArgument;  // of `error`
  Device device;  // where this rank's shards (or its replicated copy) are allocated
  std::shared_ptr<Storage> recv_storage;  // scatter, non-source: this rank's shard bytes
};

// Step 1 for every parameter: local checks and receive storage. Never fails as a whole: problems
// are recorded in ShardJob::error (naming the parameter); a device the backend cannot move is
// worded as the capability it is ("backend gloo cannot move cuda memory: parameter ...").
// With `layout_only` (AgreeOnParameters: the caller moves the data itself) every slot may hold a
// meta tensor, the source's included, nothing is allocated, and placements' devices are not
// checked against the backend (they are recorded as written).
std::vector<ShardJob> PrepareJobs(const Module& module,
                                  const std::vector<ParameterSpec>& parameters,
                                  const Communicator& comm, const ShardOptions& options,
                                  bool layout_only = false);

// What every rank must agree on, and this rank's local problems.
nlohmann::json Describe(const std::vector<ShardJob>& jobs, const ShardOptions& options,
                        int world_size);
std::vector<std::string> LocalErrors(const std::vector<ShardJob>& jobs);
// The code of the first of them (kInvalidArgument when there are none).
absl::StatusCode LocalErrorCode(const std::vector<ShardJob>& jobs);

// Reused packing memory of the source rank, across parameters.
class PackBuffer {
 public:
  // At least `bytes` of uninitialised memory on `device`, reused while it is large enough.
  // Errors: as Storage::Allocate.
  [[nodiscard]] absl::StatusOr<std::byte*> Reserve(size_t bytes, const Device& device);

 private:
  std::shared_ptr<Storage> storage_;
};

using ShardResult = std::variant<Tensor, ShardedTensor>;

// Everything TransferJobs needs, made ready before the agreement (PrepareTransfer), so that what
// can fail on one rank alone fails there and every rank learns it in the agreement.
struct PreparedTransfer {
  // kScatter, the source: per rank, one segment per sharded parameter it holds bytes of, pointing
  // into the source's tensors or into `pack` (filled).
  std::vector<std::vector<ConstBuffer>> sends;
  PackBuffer pack;
  // Per job, in job order: this rank's shards of a sharded parameter (the source's filled; a
  // scatter receiver's views over ShardJob::recv_storage; a broadcast receiver's allocated, filled
  // from `full` after the transfer), and where a broadcast lands (replicated: the result; a
  // sharded parameter under kBroadcast on a receiver: a view over `scratch`).
  std::vector<std::vector<LocalShard>> local;
  // kScatter, the source: the copies into its own shards of host-memory parameters (a shard in
  // `local`, allocated, and the region of the source it holds), made while the scatter runs: the
  // peers then move their bytes (by CMA on UCX, the source's CPU idle) as the source copies its
  // own.
  std::vector<std::pair<Tensor, Tensor>> own_copies;
  std::vector<Tensor> full;
  // kBroadcast, not the source: one buffer per device, as large as its largest sharded
  // parameter, that receives each of them whole in turn.
  std::vector<std::shared_ptr<Storage>> scratch;
};

// Step 1, the part that needs memory: on the source under kScatter, the pack buffer filled (first)
// and copies of its own shards; under kBroadcast, the source's own-shard copies, and elsewhere
// the receive buffers and this rank's shards; replicated parameters' receive tensors. Call only
// when every job passed its checks. Nothing moves between ranks.
// Errors: as Storage::Allocate and Tensor::CopyFrom (e.g. kResourceExhausted), naming the
// parameter and the step.
[[nodiscard]] absl::Status PrepareTransfer(const std::vector<ShardJob>& jobs,
                                           const Communicator& comm, const ShardOptions& options,
                                           PreparedTransfer& prepared);

// Step 3 for every agreed parameter, in an order every rank shares: with kScatter all sharded
// parameters in one ScatterSegments call, then each remaining one (replicated parameters, or all
// under kBroadcast) in job order. Only bytes move, and a broadcast receiver copies its shards out
// of what it received. Errors: transport errors, naming the parameter(s); a copy's failure.
[[nodiscard]] absl::StatusOr<std::vector<ShardResult>> TransferJobs(
    const std::vector<ShardJob>& jobs, Communicator& comm, const ShardOptions& options,
    PreparedTransfer& prepared);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SHARD_JOBS_H_
