// ShardedTensor: a tensor cut into shards that live on different ranks.
//
// Every rank holds the same global description — global shape, dtype, requires_grad, the bound
// spec and the metadata of **all** shards (in the spec's order) — plus the tensors of its own
// shards (zero, one or several; zero-size shards are kept as empty tensors).
//
//   // After ShardParameter(module, "embed.weight", spec, comm):
//   SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, module.GetSharded("embed.weight"));
//   for (const LocalShard& s : st->local_shards()) { ... s.index, s.tensor ... }
//   Tensor full;  // on rank 0 only: the destination
//   SHARDKIT_RETURN_IF_ERROR(st->Gather(/*dst=*/0, comm.rank() == 0 ? &full : nullptr, comm));
//
// Ranks in placements are ranks of the communicator the tensor was sharded over.
// Thread-safety: a const ShardedTensor may be read from several threads; collectives on it follow
// the Communicator's rules (same order on every rank).
#ifndef SHARDKIT_CORE_ENGINE_SHARDED_TENSOR_H_
#define SHARDKIT_CORE_ENGINE_SHARDED_TENSOR_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/tensor/tensor.h"
#include "specs/shard_metadata.h"
#include "specs/sharding_spec.h"

namespace shardkit {

// One of this rank's shards: its position in the global shard list and its data.
struct LocalShard {
  size_t index;
  Tensor tensor;
};

// A shard offered by a rank to InitFromLocalShards: metadata (placement rank = that rank) + data.
struct Shard {
  specs::ShardMetadata metadata;
  Tensor tensor;
};

class ShardedTensor {
 public:
  // Builds the local view without communication. `shards` is the global list (identical on every
  // rank), `local` this rank's shards (ascending index, each placed on `rank`, sizes and dtype
  // matching). Errors: kInvalidArgument naming the shard that does not match.
  [[nodiscard]] static absl::StatusOr<ShardedTensor> Create(
      Shape global_shape, DType dtype, bool requires_grad, specs::ShardingSpec spec,
      std::vector<specs::ShardMetadata> shards, std::vector<LocalShard> local, int rank);

  // Builds this rank's side of `spec` (bound here over `world_size` ranks) for a tensor of
  // `global_shape`, without communication: the shards placed on `rank` are fresh zero-filled
  // tensors on their placement's device, else on `device`. What a weight-sync destination, or a
  // test, starts from. Errors: kInvalidArgument as Bind; allocation errors.
  [[nodiscard]] static absl::StatusOr<ShardedTensor> Zeros(const Shape& global_shape, DType dtype,
                                                           const specs::ShardingSpec& spec,
                                                           int world_size, int rank,
                                                           const Device& device = Device::Cpu());

  // Collective: every rank offers its local shards; the global list (ordered by rank, then as
  // offered) is validated on every rank — same global shape, dtype and requires_grad everywhere,
  // each shard placed on the rank offering it with a tensor of the shard's size, the shards tiling
  // the tensor exactly. The spec becomes an EnumerableShardingSpec of that list.
  // Errors: kInvalidArgument, the same on every rank, naming the ranks and shards at fault.
  [[nodiscard]] static absl::StatusOr<ShardedTensor> InitFromLocalShards(
      std::vector<Shard> local_shards, const Shape& global_shape, Communicator& comm,
      const CallOptions& options = {});

  const Shape& global_shape() const { return global_shape_; }
  DType dtype() const { return dtype_; }
  bool requires_grad() const { return requires_grad_; }
  const specs::ShardingSpec& spec() const { return spec_; }
  const std::vector<specs::ShardMetadata>& shards() const { return shards_; }
  const std::vector<LocalShard>& local_shards() const { return local_; }
  // Bytes of this rank's shards.
  int64_t local_nbytes() const;

  // Collective: reassembles the whole tensor on rank `dst`, exactly (bytes are copied, never
  // converted). On `dst`, `out` must point to a tensor of the global shape and dtype (a meta or
  // default-constructed tensor is replaced by a fresh one on the CPU, or on the rank's current CUDA
  // device for a backend that moves only CUDA memory); on other ranks `out` must be nullptr. Every
  // rank sends only its own shard bytes; ranks without shards send nothing.
  // Every rank first does what can fail on it alone (checking `out`, allocating, packing), then
  // one status round, then the transfer.
  // Errors: kInvalidArgument, the same on every rank, if `dst` or any rank's `out` is wrong; a
  // rank's failure to allocate or pack (e.g. kResourceExhausted), the same on every rank, naming
  // that rank, before any byte moves; transport errors as the Communicator's.
  [[nodiscard]] absl::Status Gather(int dst, Tensor* out, Communicator& comm,
                                    const CallOptions& options = {}) const;

 private:
  ShardedTensor() = default;

  Shape global_shape_;
  DType dtype_ = DType::kFloat32;
  bool requires_grad_ = false;
  specs::ShardingSpec spec_;
  std::vector<specs::ShardMetadata> shards_;
  std::vector<LocalShard> local_;
};

// The view of `tensor` covering `shard` (offsets/sizes in the tensor's coordinates).
// Errors: as Tensor::Narrow.
[[nodiscard]] absl::StatusOr<Tensor> NarrowToShard(const Tensor& tensor,
                                                   const specs::ShardMetadata& shard);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_ENGINE_SHARDED_TENSOR_H_
