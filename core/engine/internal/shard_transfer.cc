// Steps 1 (the memory) and 3 of ShardParameters: making the agreed parameters' transfer ready, and
// moving them (PrepareTransfer and TransferJobs in shard_jobs.h).
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/background_stage.h"
#include "core/base/quote.h"
#include "core/base/slot_pipe.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/shard_jobs.h"
#include "core/tensor/host_copy.h"

namespace shardkit::internal {
namespace {

// The bytes of a contiguous tensor as a communication buffer.
MutableBuffer WholeBuffer(const Tensor& tensor) {
  return MutableBuffer(tensor.data(), static_cast<size_t>(tensor.nbytes()), tensor.device());
}

const std::vector<size_t>& MyShards(const std::vector<std::vector<size_t>>& by_rank, int rank) {
  return by_rank[static_cast<size_t>(rank)];
}

// `status` annotated with the parameter and the step, for the agreement's local errors.
absl::Status InStep(const absl::Status& status, const ShardJob& job, const std::string& step) {
  if (status.ok()) return status;
  return Annotate(status, absl::StrCat("parameter ", QuoteName(job.name), ": ", step));
}

// This rank's shards allocated on its landing device; with `from`, filled from its regions, or,
// with `later` and both in host memory, left for TransferJobs to fill (added to `later`).
absl::StatusOr<std::vector<LocalShard>> AllocateOwnShards(
    const ShardJob& job, const std::vector<size_t>& mine, const Tensor* from,
    std::vector<std::pair<Tensor, Tensor>>* later = nullptr) {
  std::vector<LocalShard> local;
  for (size_t index : mine) {
    const std::string step = absl::StrCat("copying own shard ", index);
    // On the shard's device, which may differ from the full tensor's (a source's own shard).
    absl::StatusOr<Tensor> copy = Tensor::Empty(job.shards[index].sizes, job.dtype, job.device);
    if (!copy.ok()) return InStep(copy.status(), job, step);
    if (from != nullptr) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(*from, job.shards[index]));
      if (later != nullptr && region.device().is_cpu() && copy->device().is_cpu()) {
        later->emplace_back(*copy, std::move(region));  // the same storage as `local`'s
      } else {
        SHARDKIT_RETURN_IF_ERROR(InStep(copy->CopyFrom(region), job, step));
      }
    }
    local.push_back({index, *std::move(copy)});
  }
  return local;
}

// ScatterSegments from the source, its own shards copied meanwhile by a background stage of one
// round — or first, on this thread, when they are too small to be worth a thread (under
// kStreamFrom in all).
absl::Status ScatterFromSource(Communicator& comm, const ShardOptions& options,
                               PreparedTransfer& prepared) {
  auto copy_own = [&prepared]() -> absl::Status {
    for (auto& [shard, region] : prepared.own_copies) {
      SHARDKIT_RETURN_IF_ERROR(Annotate(shard.CopyFrom(region), "copying the source's own shard"));
    }
    return absl::OkStatus();
  };
  int64_t own_bytes = 0;
  for (const auto& copy : prepared.own_copies) own_bytes += copy.first.nbytes();
  absl::Status copied;
  SlotPipe pipe(1);
  std::optional<BackgroundStage> copier;
  if (own_bytes >= static_cast<int64_t>(kStreamFrom)) {
    copier.emplace(pipe, BackgroundStage::kProducer, 1,
                   [&copy_own](int64_t, size_t) { return copy_own(); });
  } else {
    copied = copy_own();
  }
  const absl::Status scattered =
      comm.ScatterSegments(prepared.sends, {}, options.src_rank, options.call);
  if (copier.has_value()) {
    std::optional<SlotPipe::Filled> done = pipe.WaitFilled();  // the copy's status
    copied = done.has_value() ? done->status : absl::InternalError("the copier stopped");
  }
  prepared.own_copies.clear();
  return scattered.ok() ? copied : scattered;
}

// Views of this rank's shards over the block they are received into, back to back.
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
// once into `prepared.pack`. All parameters travel in one ScatterSegments call (one agreement
// round trip instead of one per parameter).
absl::Status PackScatterSends(const std::vector<ShardJob>& jobs, const Communicator& comm,
                              const ShardOptions& options, PreparedTransfer& prepared) {
  struct PackedPart {
    const ShardJob* job;
    size_t rank;
    size_t segment;
    int64_t offset;
  };
  std::vector<std::vector<ConstBuffer>>& sends = prepared.sends;
  sends.assign(static_cast<size_t>(comm.world_size()), {});
  std::vector<PackedPart> parts;
  int64_t pack_bytes = 0;
  const ShardJob* first = nullptr;
  for (const ShardJob& job : jobs) {
    if (job.replicated) continue;
    if (first == nullptr) first = &job;
    const auto by_rank = ShardIndicesByRank(job.shards, comm.world_size());
    for (size_t r = 0; r < by_rank.size(); ++r) {
      const int64_t bytes = PackedBytes(job.shards, by_rank[r], job.dtype);
      if (static_cast<int>(r) == options.src_rank || bytes == 0) continue;
      if (by_rank[r].size() == 1 && RegionIsContiguous(job.shape, job.shards[by_rank[r][0]])) {
        SHARDKIT_ASSIGN_OR_RETURN(Tensor region,
                                  NarrowToShard(*job.source, job.shards[by_rank[r][0]]));
        sends[r].push_back(
            ConstBuffer(region.data(), static_cast<size_t>(bytes), job.source->device()));
        continue;
      }
      parts.push_back({&job, r, sends[r].size(), pack_bytes});
      sends[r].push_back(ConstBuffer(nullptr, static_cast<size_t>(bytes), job.source->device()));
      pack_bytes += bytes;
    }
  }
  if (first == nullptr) return absl::OkStatus();
  // Packed regions live beside the source tensors (one device for a rank's whole batch).
  const Device device = first->source->device();
  absl::StatusOr<std::byte*> packed =
      prepared.pack.Reserve(static_cast<size_t>(pack_bytes), device);
  if (!packed.ok()) {
    return Annotate(packed.status(), absl::StrCat("packing the source's non-contiguous shards (",
                                                  pack_bytes, " bytes)"));
  }
  for (const PackedPart& part : parts) {
    const auto by_rank = ShardIndicesByRank(part.job->shards, comm.world_size());
    SHARDKIT_RETURN_IF_ERROR(InStep(
        PackRegions(*part.job->source, part.job->shards, by_rank[part.rank], *packed + part.offset),
        *part.job, absl::StrCat("packing rank ", part.rank, "'s shards")));
    sends[part.rank][part.segment].data = *packed + part.offset;
  }
  return absl::OkStatus();
}

// A broadcast receiver's view of the whole of `job` over the scratch buffer of its device.
absl::StatusOr<Tensor> ScratchView(const ShardJob& job, const PreparedTransfer& prepared) {
  if (job.source->numel() > 0) {
    for (const std::shared_ptr<Storage>& scratch : prepared.scratch) {
      if (scratch->device() != job.device) continue;
      return Tensor::FromStorage(scratch, job.shape, ContiguousStrides(job.shape), 0, job.dtype);
    }
  }
  return Tensor::Empty(job.shape, job.dtype, job.device);  // nothing to receive
}

// A broadcast receiver's scratch buffers: per device, the largest sharded parameter there.
absl::Status AllocateScratch(const std::vector<ShardJob>& jobs, PreparedTransfer& prepared) {
  std::vector<std::pair<Device, size_t>> largest;
  for (const ShardJob& job : jobs) {
    if (job.replicated) continue;
    const size_t bytes = static_cast<size_t>(job.source->nbytes());
    auto it = std::find_if(largest.begin(), largest.end(),
                           [&](const auto& entry) { return entry.first == job.device; });
    if (it == largest.end()) {
      largest.emplace_back(job.device, bytes);
    } else {
      it->second = std::max(it->second, bytes);
    }
  }
  for (const auto& [device, bytes] : largest) {
    if (bytes == 0) continue;
    absl::StatusOr<std::shared_ptr<Storage>> scratch = Storage::Allocate(device, bytes);
    if (!scratch.ok()) {
      return Annotate(scratch.status(),
                      absl::StrCat("the buffer that receives each broadcast parameter whole (",
                                   bytes, " bytes on ", device.ToString(), ")"));
    }
    prepared.scratch.push_back(*std::move(scratch));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardResult> MakeSharded(const ShardJob& job, std::vector<LocalShard> local,
                                        int rank) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardedTensor sharded,
                            ShardedTensor::Create(job.shape, job.dtype, job.requires_grad,
                                                  job.bound, job.shards, std::move(local), rank));
  return ShardResult(std::move(sharded));
}

// A replicated parameter, or a sharded one under the broadcast strategy: the broadcast, then (a
// receiver of a sharded one) its shards copied out of what arrived.
absl::StatusOr<ShardResult> TransferOne(const ShardJob& job, Communicator& comm,
                                        const ShardOptions& options, Tensor& full,
                                        std::vector<LocalShard>& local) {
  SHARDKIT_RETURN_IF_ERROR(comm.Broadcast(WholeBuffer(full), options.src_rank, options.call));
  if (job.replicated) {
    full.set_requires_grad(job.requires_grad);
    return ShardResult(full);
  }
  if (comm.rank() != options.src_rank) {
    for (LocalShard& shard : local) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(full, job.shards[shard.index]));
      SHARDKIT_RETURN_IF_ERROR(shard.tensor.CopyFrom(region));
    }
  }
  return MakeSharded(job, std::move(local), comm.rank());
}

}  // namespace

absl::Status PrepareTransfer(const std::vector<ShardJob>& jobs, const Communicator& comm,
                             const ShardOptions& options, PreparedTransfer& prepared) {
  const bool is_source = comm.rank() == options.src_rank;
  const bool scatter = options.strategy == Strategy::kScatter;
  prepared.local.assign(jobs.size(), {});
  prepared.full.assign(jobs.size(), Tensor());
  if (scatter && is_source)
    SHARDKIT_RETURN_IF_ERROR(PackScatterSends(jobs, comm, options, prepared));
  if (!scatter && !is_source) SHARDKIT_RETURN_IF_ERROR(AllocateScratch(jobs, prepared));
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ShardJob& job = jobs[i];
    if (job.replicated) {  // broadcast whole: every rank's copy, the source's its own
      if (is_source) {
        prepared.full[i] = *job.source;
        continue;
      }
      absl::StatusOr<Tensor> full = Tensor::Empty(job.shape, job.dtype, job.device);
      if (!full.ok()) return InStep(full.status(), job, "receiving the whole tensor");
      prepared.full[i] = *std::move(full);
      continue;
    }
    const auto by_rank = ShardIndicesByRank(job.shards, comm.world_size());
    const std::vector<size_t>& mine = MyShards(by_rank, comm.rank());
    if (scatter && !is_source) {
      SHARDKIT_ASSIGN_OR_RETURN(prepared.local[i], ViewsOverReceived(job, mine));
      continue;
    }
    if (!scatter) {
      if (is_source) {
        prepared.full[i] = *job.source;
      } else {
        SHARDKIT_ASSIGN_OR_RETURN(prepared.full[i], ScratchView(job, prepared));
      }
    }
    SHARDKIT_ASSIGN_OR_RETURN(
        prepared.local[i],
        AllocateOwnShards(job, mine, is_source ? job.source : nullptr,
                          scatter && is_source ? &prepared.own_copies : nullptr));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ShardResult>> TransferJobs(const std::vector<ShardJob>& jobs,
                                                      Communicator& comm,
                                                      const ShardOptions& options,
                                                      PreparedTransfer& prepared) {
  std::vector<std::optional<ShardResult>> results(jobs.size());
  if (options.strategy == Strategy::kScatter) {  // every sharded parameter in one call
    std::vector<MutableBuffer> recvs;  // a receiver: one segment per parameter it holds bytes of
    size_t batch = 0;
    for (const ShardJob& job : jobs) {
      if (job.replicated) continue;
      ++batch;
      if (comm.rank() != options.src_rank && job.recv_storage->nbytes() > 0) {
        recvs.push_back(MutableBuffer(job.recv_storage->data(), job.recv_storage->nbytes(),
                                      job.recv_storage->device()));
      }
    }
    if (batch > 0) {
      absl::Status scattered =
          comm.rank() == options.src_rank
              ? ScatterFromSource(comm, options, prepared)
              : comm.ScatterSegments({}, recvs, options.src_rank, options.call);
      if (!scattered.ok()) {
        return Annotate(scattered,
                        absl::StrCat("ShardParameter(scatter of ", batch, " parameters)"));
      }
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].replicated) continue;
        SHARDKIT_ASSIGN_OR_RETURN(results[i],
                                  MakeSharded(jobs[i], std::move(prepared.local[i]), comm.rank()));
      }
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {  // the rest, one collective each, in order
    if (results[i].has_value()) continue;
    absl::StatusOr<ShardResult> result =
        TransferOne(jobs[i], comm, options, prepared.full[i], prepared.local[i]);
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
