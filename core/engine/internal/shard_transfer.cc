// Step 3 of ShardParameters: moving the agreed parameters (TransferJobs in shard_jobs.h).
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/shard_jobs.h"

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
    SHARDKIT_ASSIGN_OR_RETURN(full, Tensor::Empty(job.shape, job.dtype, job.device));
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
    // On the shard's device, which may differ from the full tensor's (a source's own shard).
    SHARDKIT_ASSIGN_OR_RETURN(Tensor copy,
                              Tensor::Empty(region.shape(), region.dtype(), job.device));
    SHARDKIT_RETURN_IF_ERROR(copy.CopyFrom(region));
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

// The source's part of a batched scatter: for every rank, one segment per parameter it holds
// bytes of — straight from the source's memory when that is one contiguous region, else packed
// once into `pack`. All parameters travel in one ScatterSegments call (one agreement round trip
// instead of one per parameter).
absl::Status ScatterBatchFromSource(const std::vector<const ShardJob*>& jobs, Communicator& comm,
                                    const ShardOptions& options, PackBuffer& pack) {
  struct PackedPart {
    const ShardJob* job;
    size_t rank;
    size_t segment;
    int64_t offset;
  };
  std::vector<std::vector<ConstBuffer>> sends(static_cast<size_t>(comm.world_size()));
  std::vector<PackedPart> parts;
  int64_t pack_bytes = 0;
  for (const ShardJob* job : jobs) {
    const auto by_rank = ShardIndicesByRank(job->shards, comm.world_size());
    for (size_t r = 0; r < by_rank.size(); ++r) {
      const int64_t bytes = PackedBytes(job->shards, by_rank[r], job->dtype);
      if (static_cast<int>(r) == options.src_rank || bytes == 0) continue;
      if (by_rank[r].size() == 1 && RegionIsContiguous(job->shape, job->shards[by_rank[r][0]])) {
        SHARDKIT_ASSIGN_OR_RETURN(Tensor region,
                                  NarrowToShard(*job->source, job->shards[by_rank[r][0]]));
        sends[r].push_back(
            ConstBuffer(region.data(), static_cast<size_t>(bytes), job->source->device()));
        continue;
      }
      parts.push_back({job, r, sends[r].size(), pack_bytes});
      sends[r].push_back(ConstBuffer(nullptr, static_cast<size_t>(bytes), job->source->device()));
      pack_bytes += bytes;
    }
  }
  // Packed regions live beside the source tensors (one device for a rank's whole batch).
  const Device device = jobs.empty() ? Device::Cpu() : jobs.front()->source->device();
  SHARDKIT_ASSIGN_OR_RETURN(std::byte * packed,
                            pack.Reserve(static_cast<size_t>(pack_bytes), device));
  for (const PackedPart& part : parts) {
    const auto by_rank = ShardIndicesByRank(part.job->shards, comm.world_size());
    SHARDKIT_RETURN_IF_ERROR(
        PackRegions(*part.job->source, part.job->shards, by_rank[part.rank], packed + part.offset));
    sends[part.rank][part.segment].data = packed + part.offset;
  }
  return comm.ScatterSegments(sends, {}, options.src_rank, options.call);
}

// Every rank's side of a batched scatter; returns each job's local shards.
absl::StatusOr<std::vector<std::vector<LocalShard>>> ScatterBatch(
    const std::vector<const ShardJob*>& jobs, Communicator& comm, const ShardOptions& options,
    PackBuffer& pack) {
  const bool is_source = comm.rank() == options.src_rank;
  if (is_source) {
    SHARDKIT_RETURN_IF_ERROR(ScatterBatchFromSource(jobs, comm, options, pack));
  } else {
    std::vector<MutableBuffer> recvs;  // one segment per parameter this rank holds bytes of
    for (const ShardJob* job : jobs) {
      if (job->recv_storage->nbytes() > 0) {
        recvs.push_back(MutableBuffer(job->recv_storage->data(), job->recv_storage->nbytes(),
                                      job->recv_storage->device()));
      }
    }
    SHARDKIT_RETURN_IF_ERROR(comm.ScatterSegments({}, recvs, options.src_rank, options.call));
  }
  std::vector<std::vector<LocalShard>> local;
  for (const ShardJob* job : jobs) {
    const auto by_rank = ShardIndicesByRank(job->shards, comm.world_size());
    const std::vector<size_t>& mine = by_rank[static_cast<size_t>(comm.rank())];
    SHARDKIT_ASSIGN_OR_RETURN(local.emplace_back(), is_source
                                                        ? CopyOwnShards(*job, *job->source, mine)
                                                        : ViewsOverReceived(*job, mine));
  }
  return local;
}

absl::StatusOr<std::vector<LocalShard>> ShardByBroadcast(const ShardJob& job, Communicator& comm,
                                                         const ShardOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor full, BroadcastWhole(job, comm, options));
  const auto by_rank = ShardIndicesByRank(job.shards, comm.world_size());
  return CopyOwnShards(job, full, by_rank[static_cast<size_t>(comm.rank())]);
}

absl::StatusOr<ShardResult> MakeSharded(const ShardJob& job, std::vector<LocalShard> local,
                                        int rank) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardedTensor sharded,
                            ShardedTensor::Create(job.shape, job.dtype, job.requires_grad,
                                                  job.bound, job.shards, std::move(local), rank));
  return ShardResult(std::move(sharded));
}

// A replicated parameter, or a sharded one under the broadcast strategy.
absl::StatusOr<ShardResult> TransferOne(const ShardJob& job, Communicator& comm,
                                        const ShardOptions& options) {
  if (job.replicated) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor full, BroadcastWhole(job, comm, options));
    return ShardResult(std::move(full));
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<LocalShard> local, ShardByBroadcast(job, comm, options));
  return MakeSharded(job, std::move(local), comm.rank());
}

}  // namespace

absl::StatusOr<std::vector<ShardResult>> TransferJobs(const std::vector<ShardJob>& jobs,
                                                      Communicator& comm,
                                                      const ShardOptions& options,
                                                      PackBuffer& pack) {
  std::vector<std::optional<ShardResult>> results(jobs.size());
  if (options.strategy == Strategy::kScatter) {  // every sharded parameter in one call
    std::vector<const ShardJob*> batch;
    std::vector<size_t> where;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!jobs[i].replicated) batch.push_back(&jobs[i]), where.push_back(i);
    }
    if (!batch.empty()) {
      absl::StatusOr<std::vector<std::vector<LocalShard>>> local =
          ScatterBatch(batch, comm, options, pack);
      if (!local.ok()) {
        return Annotate(local.status(),
                        absl::StrCat("ShardParameter(scatter of ", batch.size(), " parameters)"));
      }
      for (size_t k = 0; k < batch.size(); ++k) {
        SHARDKIT_ASSIGN_OR_RETURN(results[where[k]],
                                  MakeSharded(*batch[k], std::move((*local)[k]), comm.rank()));
      }
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {  // the rest, one collective each, in order
    if (results[i].has_value()) continue;
    absl::StatusOr<ShardResult> result = TransferOne(jobs[i], comm, options);
    if (!result.ok()) {
      return Annotate(result.status(), absl::StrCat("ShardParameter(", jobs[i].name, ")"));
    }
    results[i] = *std::move(result);
  }
  std::vector<ShardResult> out;
  for (auto& result : results) out.push_back(*std::move(result));
  return out;
}

}  // namespace shardkit::internal
