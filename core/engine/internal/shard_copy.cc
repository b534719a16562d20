#include "core/engine/internal/shard_copy.h"

#include "core/base/status_macros.h"
#include "core/engine/sharded_tensor.h"

namespace shardkit::internal {

std::vector<std::vector<size_t>> ShardIndicesByRank(const std::vector<specs::ShardMetadata>& shards,
                                                    int world_size) {
  std::vector<std::vector<size_t>> by_rank(static_cast<size_t>(world_size));
  for (size_t i = 0; i < shards.size(); ++i) {
    by_rank[static_cast<size_t>(shards[i].placement.rank())].push_back(i);
  }
  return by_rank;
}

Device PlacementDevice(const specs::Placement& placement, const Communicator& comm) {
  return placement.device().value_or(comm.DefaultDevice());
}

int64_t ShardBytes(const specs::ShardMetadata& shard, DType dtype) {
  int64_t n = static_cast<int64_t>(ElementSize(dtype));
  for (int64_t size : shard.sizes) n *= size;
  return n;
}

int64_t PackedBytes(const std::vector<specs::ShardMetadata>& shards,
                    const std::vector<size_t>& indices, DType dtype) {
  int64_t total = 0;
  for (size_t i : indices) total += ShardBytes(shards[i], dtype);
  return total;
}

absl::StatusOr<Tensor> TensorOverBytes(void* data, const Shape& shape, DType dtype,
                                       const Device& device) {
  SHARDKIT_ASSIGN_OR_RETURN(ShapeSize size, ComputeShapeSize(shape, dtype));
  if (size.numel == 0) return Tensor::Meta(shape, dtype);  // nothing to copy either way
  auto storage = Storage::Wrap(data, static_cast<size_t>(size.nbytes), device, [] {});
  return Tensor::FromStorage(std::move(storage), shape, ContiguousStrides(shape), 0, dtype);
}

absl::Status PackRegions(const Tensor& full, const std::vector<specs::ShardMetadata>& shards,
                         const std::vector<size_t>& indices, std::byte* packed) {
  for (size_t i : indices) {
    const int64_t nbytes = ShardBytes(shards[i], full.dtype());
    if (nbytes == 0) continue;
    SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(full, shards[i]));
    SHARDKIT_ASSIGN_OR_RETURN(
        Tensor out, TensorOverBytes(packed, shards[i].sizes, full.dtype(), full.device()));
    SHARDKIT_RETURN_IF_ERROR(out.CopyFrom(region));
    packed += nbytes;
  }
  return absl::OkStatus();
}

absl::Status UnpackRegions(const std::byte* packed, const std::vector<specs::ShardMetadata>& shards,
                           const std::vector<size_t>& indices, Tensor& full) {
  for (size_t i : indices) {
    const int64_t nbytes = ShardBytes(shards[i], full.dtype());
    if (nbytes == 0) continue;
    SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(full, shards[i]));
    SHARDKIT_ASSIGN_OR_RETURN(
        Tensor in, TensorOverBytes(const_cast<std::byte*>(packed), shards[i].sizes, full.dtype(),
                                   full.device()));
    SHARDKIT_RETURN_IF_ERROR(region.CopyFrom(in));
    packed += nbytes;
  }
  return absl::OkStatus();
}

bool RegionIsContiguous(const Shape& global_shape, const specs::ShardMetadata& shard) {
  // Contiguous iff, after the first dim where the shard is narrower than the tensor, every later
  // dim is whole, and every earlier dim has size 1 in the shard (or the shard is empty).
  const size_t ndim = global_shape.size();
  size_t d = 0;
  while (d < ndim && shard.sizes[d] == 1) ++d;  // leading singleton dims never break contiguity
  if (d == ndim) return true;
  for (size_t k = d + 1; k < ndim; ++k) {
    if (shard.sizes[k] != global_shape[k]) {
      for (int64_t s : shard.sizes) {
        if (s == 0) return true;
      }
      return false;
    }
  }
  return true;
}

}  // namespace shardkit::internal
