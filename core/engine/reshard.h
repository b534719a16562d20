// Reshard: redistribute a ShardedTensor to another spec, moving only the bytes that change hands.
//
//   SHARDKIT_ASSIGN_OR_RETURN(ShardedTensor by_cols, Reshard(by_rows, column_spec, comm));
//
// Any chunk or enumerable spec to any other, uneven sizes, several shards per rank (PyTorch 1.13
// supports only chunk→chunk with one local shard per rank). It is weight sync's box mover with the
// same ranks on both sides (core/engine/sync.h; internal/box_mover.h): every rank derives the same
// rounds from the two specs' boxes (the box-intersection index, never all pairs), and its pieces:
// what it keeps is copied shard to shard; a piece contiguous in both shards moves straight between
// them; a strided one goes through staging of 64 MiB per rank at most (three buckets, reused round
// after round; on Gloo a strided send is handed over as its runs, not packed), so a reshard holds
// the old and new shards and that staging, never a second copy of what it moves.
#ifndef SHARDKIT_CORE_ENGINE_RESHARD_H_
#define SHARDKIT_CORE_ENGINE_RESHARD_H_

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/sharded_tensor.h"
#include "core/engine/sync.h"
#include "specs/sharding_spec.h"

namespace shardkit {

// Collective over the communicator `tensor` was sharded on. The result uses the bound `new_spec`
// and lists its shards in that spec's order; `tensor` is unchanged.
// Steps: the agreement on the descriptor; the plan (one all-gather: the rounds' merge); on every
// rank, its new shards and staging allocated; one status round; the rounds, one PreparedTransfer
// on host memory (core/comm/prepared_transfer.h), an AllToAllSegments each on a device.
// Errors: kInvalidArgument (same on every rank) if a rank's `new_spec` does not bind to the global
// shape and world, or ranks disagree on it; kInvalidArgument (every rank) naming the rank and
// shard when a shard, old or new, is on a device the backend cannot move (CUDA memory on Gloo,
// host memory on NCCL); a rank's failure to allocate a new shard or its
// staging ("send wire staging", "receive wire staging"; e.g. kResourceExhausted), the same on
// every rank, naming that rank, before any byte moves; transport errors as the Communicator's.
[[nodiscard]] absl::StatusOr<ShardedTensor> Reshard(const ShardedTensor& tensor,
                                                    const specs::ShardingSpec& new_spec,
                                                    Communicator& comm,
                                                    const CallOptions& options = {});

struct ReshardOptions {
  // Staging per rank, as weight sync's (SyncOptions::memory_bytes): pieces that are not one run
  // on both sides move through three buckets of a third, reused round after round; at least
  // kMinMoverMemoryBytes (a smaller budget is raised to it). Every rank must give the same: the
  // rounds depend on it (a mismatch is the agreement's kInvalidArgument on every rank).
  int64_t memory_bytes = kDefaultMoverMemoryBytes;
  CallOptions call;
};

// Reshard above with a staging budget of the caller's.
[[nodiscard]] absl::StatusOr<ShardedTensor> Reshard(const ShardedTensor& tensor,
                                                    const specs::ShardingSpec& new_spec,
                                                    Communicator& comm,
                                                    const ReshardOptions& options);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_ENGINE_RESHARD_H_
