// Internal helpers shared by ShardedTensor::Gather, ShardParameter and Reshard: which shards each
// rank holds, their byte sizes, and copying shard regions between a full tensor and packed bytes
// (a rank's shards laid out back to back, in shard-list order — the wire format of every transfer).
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SHARD_COPY_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SHARD_COPY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/tensor/tensor.h"
#include "specs/shard_metadata.h"

namespace shardkit::internal {

// For each rank in [0, world_size): the indices of the shards placed on it, ascending.
// Placements must already be checked to lie inside the world.
std::vector<std::vector<size_t>> ShardIndicesByRank(const std::vector<specs::ShardMetadata>& shards,
                                                    int world_size);

// The device of a shard placed by `placement` on this rank: the placement's device, or
// comm.DefaultDevice() when it names none.
Device PlacementDevice(const specs::Placement& placement, const Communicator& comm);

// Bytes of one shard of `dtype`. The shard must fit in the tensor (validated metadata).
int64_t ShardBytes(const specs::ShardMetadata& shard, DType dtype);

// Sum of ShardBytes over `indices`.
int64_t PackedBytes(const std::vector<specs::ShardMetadata>& shards,
                    const std::vector<size_t>& indices, DType dtype);

// A contiguous tensor over caller-owned bytes (not owned; the caller keeps them alive).
[[nodiscard]] absl::StatusOr<Tensor> TensorOverBytes(void* data, const Shape& shape, DType dtype,
                                                     const Device& device);

// Copies the regions of `indices` from `full` into `packed`, back to back.
[[nodiscard]] absl::Status PackRegions(const Tensor& full,
                                       const std::vector<specs::ShardMetadata>& shards,
                                       const std::vector<size_t>& indices, std::byte* packed);

// Copies packed bytes (as PackRegions wrote them) into the regions of `indices` of `full`.
[[nodiscard]] absl::Status UnpackRegions(const std::byte* packed,
                                         const std::vector<specs::ShardMetadata>& shards,
                                         const std::vector<size_t>& indices, Tensor& full);

// True if the region of `shard` in a contiguous tensor of `global_shape` is itself contiguous
// (so it can be sent or received in place).
bool RegionIsContiguous(const Shape& global_shape, const specs::ShardMetadata& shard);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SHARD_COPY_H_
