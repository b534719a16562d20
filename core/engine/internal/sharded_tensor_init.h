// Internal: the collective validation behind ShardedTensor::InitFromLocalShards.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SHARDED_TENSOR_INIT_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SHARDED_TENSOR_INIT_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/sharded_tensor.h"

namespace shardkit::internal {

struct GlobalShardList {
  std::vector<specs::ShardMetadata> shards;  // every rank's shards, by rank, then as offered
  size_t first_local_index = 0;              // where this rank's shards start in `shards`
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
};

// Collective: exchanges every rank's local shard metadata and checks it (see
// ShardedTensor::InitFromLocalShards). Errors: kInvalidArgument, identical on every rank.
[[nodiscard]] absl::StatusOr<GlobalShardList> AgreeOnLocalShards(const std::vector<Shard>& local,
                                                                 const Shape& global_shape,
                                                                 Communicator& comm,
                                                                 const CallOptions& options);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SHARDED_TENSOR_INIT_H_
