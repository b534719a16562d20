#include "core/engine/sharded_tensor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/sharded_tensor_init.h"

namespace shardkit {
namespace {

using specs::ShardMetadata;

absl::Status CheckLocalShard(const ShardMetadata& shard, const Tensor& tensor, DType dtype,
                             size_t index) {
  if (tensor.shape() != shard.sizes || tensor.dtype() != dtype || tensor.is_meta()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local shard ", index, " (", specs::ShardToString(shard), ") holds ", tensor.DebugString(),
        ", expected ", std::string(DTypeName(dtype)), ShapeToString(shard.sizes)));
  }
  return absl::OkStatus();
}

// Validates `out` on the destination rank (allocating it if it is meta) and its absence elsewhere.
absl::Status PrepareGatherOutput(const ShardedTensor& st, int dst, Tensor* out,
                                 const Communicator& comm) {
  const int rank = comm.rank();
  const int world_size = comm.world_size();
  if (dst < 0 || dst >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("dst ", dst, " is outside the group of ", world_size, " ranks"));
  }
  if (rank != dst) {
    if (out != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("out must be nullptr on ranks other than dst ", dst));
    }
    return absl::OkStatus();
  }
  if (out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("out is nullptr on dst rank ", dst));
  }
  if (out->is_meta()) {
    SHARDKIT_ASSIGN_OR_RETURN(
        *out, Tensor::Empty(st.global_shape(), st.dtype(), internal::DefaultDevice(comm)));
  }
  if (out->shape() != st.global_shape() || out->dtype() != st.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("out is ", out->DebugString(), " but the sharded tensor is ",
                     std::string(DTypeName(st.dtype())), ShapeToString(st.global_shape())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> NarrowToShard(const Tensor& tensor, const ShardMetadata& shard) {
  Tensor view = tensor;
  for (size_t d = 0; d < shard.offsets.size(); ++d) {
    SHARDKIT_ASSIGN_OR_RETURN(
        view, view.Narrow(static_cast<int64_t>(d), shard.offsets[d], shard.sizes[d]));
  }
  return view;
}

absl::StatusOr<ShardedTensor> ShardedTensor::Create(Shape global_shape, DType dtype,
                                                    bool requires_grad, specs::ShardingSpec spec,
                                                    std::vector<ShardMetadata> shards,
                                                    std::vector<LocalShard> local, int rank) {
  for (size_t k = 0; k < local.size(); ++k) {
    const size_t index = local[k].index;
    if (index >= shards.size() || (k > 0 && index <= local[k - 1].index) ||
        shards[index].placement.rank() != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("local shard ", index, " is not a shard of rank ", rank, " (", shards.size(),
                       " shards; local indices must ascend)"));
    }
    SHARDKIT_RETURN_IF_ERROR(CheckLocalShard(shards[index], local[k].tensor, dtype, index));
    // Local shards are always contiguous: they go on the wire in place.
    SHARDKIT_ASSIGN_OR_RETURN(local[k].tensor, local[k].tensor.Contiguous());
    local[k].tensor.set_requires_grad(requires_grad);
  }
  ShardedTensor st;
  st.global_shape_ = std::move(global_shape);
  st.dtype_ = dtype;
  st.requires_grad_ = requires_grad;
  st.spec_ = std::move(spec);
  st.shards_ = std::move(shards);
  st.local_ = std::move(local);
  return st;
}

absl::StatusOr<ShardedTensor> ShardedTensor::InitFromLocalShards(std::vector<Shard> local_shards,
                                                                 const Shape& global_shape,
                                                                 Communicator& comm,
                                                                 const CallOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(
      internal::GlobalShardList global,
      internal::AgreeOnLocalShards(local_shards, global_shape, comm, options));
  std::vector<LocalShard> local;
  for (size_t k = 0; k < local_shards.size(); ++k) {
    local.push_back({global.first_local_index + k, std::move(local_shards[k].tensor)});
  }
  specs::ShardingSpec spec = specs::EnumerableShardingSpec{global.shards};
  return Create(global_shape, global.dtype, global.requires_grad, std::move(spec),
                std::move(global.shards), std::move(local), comm.rank());
}

int64_t ShardedTensor::local_nbytes() const {
  int64_t total = 0;
  for (const LocalShard& shard : local_) total += shard.tensor.nbytes();
  return total;
}

absl::Status ShardedTensor::Gather(int dst, Tensor* out, Communicator& comm,
                                   const CallOptions& options) const {
  const int rank = comm.rank();
  SHARDKIT_RETURN_IF_ERROR(
      AgreeOnStatus(comm, PrepareGatherOutput(*this, dst, out, comm), "Gather", options));
  const auto by_rank = internal::ShardIndicesByRank(shards_, comm.world_size());

  if (rank != dst) {
    // This rank's shards back to back: in place when it holds one, else packed once.
    std::shared_ptr<Storage> packed;
    ConstBuffer send;
    if (local_.size() == 1) {
      const Tensor& t = local_[0].tensor;
      send = ConstBuffer(t.data(), static_cast<size_t>(t.nbytes()), t.device());
    } else {
      // Packed beside the shards (several shards of one rank share a device).
      const Device device =
          local_.empty() ? internal::DefaultDevice(comm) : local_[0].tensor.device();
      SHARDKIT_ASSIGN_OR_RETURN(packed,
                                Storage::Allocate(device, static_cast<size_t>(local_nbytes())));
      std::byte* cursor = static_cast<std::byte*>(packed->data());
      for (const LocalShard& shard : local_) {
        if (shard.tensor.numel() == 0) continue;
        SHARDKIT_ASSIGN_OR_RETURN(
            Tensor view, internal::TensorOverBytes(cursor, shard.tensor.shape(), dtype_, device));
        SHARDKIT_RETURN_IF_ERROR(view.CopyFrom(shard.tensor));
        cursor += shard.tensor.nbytes();
      }
      send = ConstBuffer(packed->data(), packed->nbytes(), device);
    }
    return comm.Gather(send, {}, dst, options);
  }

  // The destination: its own shards by local copy, the others received in place when their
  // region of `out` is contiguous and they hold one shard, else through one staging buffer.
  for (const LocalShard& shard : local_) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(*out, shards_[shard.index]));
    if (region.numel() > 0) SHARDKIT_RETURN_IF_ERROR(region.CopyFrom(shard.tensor));
  }
  std::vector<MutableBuffer> recvs(by_rank.size());
  std::vector<int64_t> staging_offset(by_rank.size(), -1);
  int64_t staging_bytes = 0;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (static_cast<int>(r) == dst) continue;
    const int64_t nbytes = internal::PackedBytes(shards_, by_rank[r], dtype_);
    if (by_rank[r].size() == 1 && out->IsContiguous() &&
        internal::RegionIsContiguous(global_shape_, shards_[by_rank[r][0]])) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(*out, shards_[by_rank[r][0]]));
      recvs[r] = MutableBuffer(region.data(), static_cast<size_t>(nbytes), out->device());
    } else {
      staging_offset[r] = staging_bytes;
      staging_bytes += nbytes;
    }
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> staging_storage,
                            Storage::Allocate(out->device(), static_cast<size_t>(staging_bytes)));
  std::byte* staging = static_cast<std::byte*>(staging_storage->data());
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (staging_offset[r] >= 0) {
      recvs[r] = MutableBuffer(
          staging + staging_offset[r],
          static_cast<size_t>(internal::PackedBytes(shards_, by_rank[r], dtype_)), out->device());
    }
  }
  SHARDKIT_RETURN_IF_ERROR(comm.Gather(ConstBuffer(), recvs, dst, options));
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (staging_offset[r] < 0) continue;
    SHARDKIT_RETURN_IF_ERROR(
        internal::UnpackRegions(staging + staging_offset[r], shards_, by_rank[r], *out));
  }
  return absl::OkStatus();
}

}  // namespace shardkit
