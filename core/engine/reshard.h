// Reshard: redistribute a ShardedTensor to another spec, moving only the bytes that change hands.
//
//   SHARDKIT_ASSIGN_OR_RETURN(ShardedTensor by_cols, Reshard(by_rows, column_spec, comm));
//
// Any chunk or enumerable spec to any other, uneven sizes, several shards per rank (PyTorch 1.13
// supports only chunk→chunk with one local shard per rank). Every rank computes the same plan: for
// each pair (old shard i, new shard j) the intersection of their regions; rank a sends rank b the
// intersections of a's old shards with b's new shards, back to back in (j, i) order, in one
// AllToAll with per-pair sizes. Pieces a rank keeps are copied locally.
#ifndef SHARDKIT_CORE_ENGINE_RESHARD_H_
#define SHARDKIT_CORE_ENGINE_RESHARD_H_

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/sharded_tensor.h"
#include "specs/sharding_spec.h"

namespace shardkit {

// Collective over the communicator `tensor` was sharded on. The result uses the bound `new_spec`
// and lists its shards in that spec's order; `tensor` is unchanged.
// Steps: the agreement on the descriptor; on every rank, its new shards and wires allocated and
// what it sends packed; one status round; the AllToAll; unpacking.
// Errors: kInvalidArgument (same on every rank) if a rank's `new_spec` does not bind to the global
// shape and world, or ranks disagree on it; a rank's failure to allocate or pack (e.g.
// kResourceExhausted), the same on every rank, naming that rank, before any byte moves; transport
// errors as the Communicator's.
[[nodiscard]] absl::StatusOr<ShardedTensor> Reshard(const ShardedTensor& tensor,
                                                    const specs::ShardingSpec& new_spec,
                                                    Communicator& comm,
                                                    const CallOptions& options = {});

}  // namespace shardkit

#endif  // SHARDKIT_CORE_ENGINE_RESHARD_H_
