// Step 3 of ShardParameters: moving one agreed parameter (TransferJob in shard_jobs.h).
#include "absl/strings/str_cat.h"
#include "core/internal/shard_copy.h"
#include "core/internal/shard_jobs.h"
#include "core/status_macros.h"

namespace shardkit::internal {
namespace {

// The bytes of a contiguous tensor as a communication buffer.
MutableBuffer WholeBuffer(const Tensor& tensor) {
  return MutableBuffer(tensor.data(), static_cast<size_t>(tensor.nbytes()), tensor.device());
}

// Every rank's copy of the whole tensor: the source's own, elsewhere received into fresh memory.
absl::StatusOr<Tensor> BroadcastWhole(const ShardJob& job, Communicator& comm,
                                      const ShardOptions& options) {
  Tensor full = *job.source;
  if (comm.rank() != options.src_rank) {
    SHARDKIT_ASSIGN_OR_RETURN(full, Tensor::Empty(job.shape, job.dtype));
  }
  SHARDKIT_RETURN_IF_ERROR(comm.Broadcast(WholeBuffer(full), options.src_rank, options.call));
  full.set_requires_grad(job.requires_grad);
  return full;
}

// This rank's shards as copies of their regions of `full`.
absl::StatusOr<std::vector<LocalShard>> CopyOwnShards(const ShardJob& job, const Tensor& full,
                                                      const std::vector<size_t>& mine) {
  std::vector<LocalShard> local;
  for (size_t index : mine) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(full, job.shards[index]));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor copy, region.Clone());
    local.push_back({index, std::move(copy)});
  }
  return local;
}

// Views of this rank's shards over the block they were received into, back to back.
absl::StatusOr<std::vector<LocalShard>> ViewsOverReceived(const ShardJob& job,
                                                          const std::vector<size_t>& mine) {
  std::vector<LocalShard> local;
  int64_t offset = 0;  // elements
  for (size_t index : mine) {
    const Shape& sizes = job.shards[index].sizes;
    SHARDKIT_ASSIGN_OR_RETURN(
        Tensor view,
        Tensor::FromStorage(job.recv_storage, sizes, ContiguousStrides(sizes), offset, job.dtype));
    offset += view.numel();
    local.push_back({index, std::move(view)});
  }
  return local;
}

// The source's scatter: each rank's shards straight from the source's memory when they are one
// contiguous region, else packed once into `pack`.
absl::Status ScatterFromSource(const ShardJob& job, const std::vector<std::vector<size_t>>& by_rank,
                               Communicator& comm, const ShardOptions& options, PackBuffer& pack) {
  const Tensor& source = *job.source;
  std::vector<ConstBuffer> sends(by_rank.size());
  std::vector<int64_t> pack_offset(by_rank.size(), -1);
  int64_t pack_bytes = 0;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (static_cast<int>(r) == options.src_rank) continue;
    const int64_t bytes = PackedBytes(job.shards, by_rank[r], job.dtype);
    if (bytes == 0) continue;
    if (by_rank[r].size() == 1 && RegionIsContiguous(job.shape, job.shards[by_rank[r][0]])) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(source, job.shards[by_rank[r][0]]));
      sends[r] = ConstBuffer(region.data(), static_cast<size_t>(bytes), source.device());
    } else {
      pack_offset[r] = pack_bytes;
      pack_bytes += bytes;
    }
  }
  std::byte* packed = pack.Reserve(static_cast<size_t>(pack_bytes));
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (pack_offset[r] < 0) continue;
    SHARDKIT_RETURN_IF_ERROR(PackRegions(source, job.shards, by_rank[r], packed + pack_offset[r]));
    sends[r] = ConstBuffer(packed + pack_offset[r],
                           static_cast<size_t>(PackedBytes(job.shards, by_rank[r], job.dtype)));
  }
  return comm.Scatter(sends, MutableBuffer(), options.src_rank, options.call);
}

absl::StatusOr<std::vector<LocalShard>> ShardByScatter(const ShardJob& job, Communicator& comm,
                                                       const ShardOptions& options,
                                                       PackBuffer& pack) {
  const auto by_rank = ShardIndicesByRank(job.shards, comm.world_size());
  const std::vector<size_t>& mine = by_rank[static_cast<size_t>(comm.rank())];
  if (comm.rank() == options.src_rank) {
    SHARDKIT_RETURN_IF_ERROR(ScatterFromSource(job, by_rank, comm, options, pack));
    return CopyOwnShards(job, *job.source, mine);
  }
  MutableBuffer recv(job.recv_storage->data(), job.recv_storage->nbytes());
  SHARDKIT_RETURN_IF_ERROR(comm.Scatter({}, recv, options.src_rank, options.call));
  return ViewsOverReceived(job, mine);
}

absl::StatusOr<std::vector<LocalShard>> ShardByBroadcast(const ShardJob& job, Communicator& comm,
                                                         const ShardOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor full, BroadcastWhole(job, comm, options));
  const auto by_rank = ShardIndicesByRank(job.shards, comm.world_size());
  return CopyOwnShards(job, full, by_rank[static_cast<size_t>(comm.rank())]);
}

}  // namespace

absl::StatusOr<ShardResult> TransferJob(const ShardJob& job, Communicator& comm,
                                        const ShardOptions& options, PackBuffer& pack) {
  if (job.replicated) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor full, BroadcastWhole(job, comm, options));
    return ShardResult(std::move(full));
  }
  std::vector<LocalShard> local;
  if (options.strategy == Strategy::kScatter) {
    SHARDKIT_ASSIGN_OR_RETURN(local, ShardByScatter(job, comm, options, pack));
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(local, ShardByBroadcast(job, comm, options));
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      ShardedTensor sharded,
      ShardedTensor::Create(job.shape, job.dtype, job.requires_grad, job.bound, job.shards,
                            std::move(local), comm.rank()));
  return ShardResult(std::move(sharded));
}

}  // namespace shardkit::internal
