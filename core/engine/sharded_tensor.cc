#include "core/engine/sharded_tensor.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/sharded_tensor_init.h"
#include "specs/layout.h"

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
    SHARDKIT_ASSIGN_OR_RETURN(*out,
                              Tensor::Empty(st.global_shape(), st.dtype(), comm.DefaultDevice()));
  }
  if (out->shape() != st.global_shape() || out->dtype() != st.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("out is ", out->DebugString(), " but the sharded tensor is ",
                     std::string(DTypeName(st.dtype())), ShapeToString(st.global_shape())));
  }
  return absl::OkStatus();
}

// What Gather moves on this rank, made ready before any byte moves.
struct GatherSide {
  ConstBuffer send;                     // a sender: its shards, back to back
  std::shared_ptr<Storage> packed;      // a sender holding several shards: they, packed
  std::vector<MutableBuffer> recvs;     // the destination: per rank, where its bytes go
  std::vector<int64_t> staging_offset;  // per rank, into `staging`, or -1 (received in place)
  std::shared_ptr<Storage> staging;
};

// A sender's shards back to back: in place when it holds one, else packed once beside them
// (several shards of one rank share a device). Errors: as Storage::Allocate and CopyFrom.
absl::Status PrepareSend(const ShardedTensor& st, const Communicator& comm, GatherSide& side) {
  const std::vector<LocalShard>& local = st.local_shards();
  if (local.size() == 1) {
    const Tensor& t = local[0].tensor;
    side.send = ConstBuffer(t.data(), static_cast<size_t>(t.nbytes()), t.device());
    return absl::OkStatus();
  }
  const std::string step = absl::StrCat("packing this rank's ", local.size(), " shards");
  const Device device = local.empty() ? comm.DefaultDevice() : local[0].tensor.device();
  absl::StatusOr<std::shared_ptr<Storage>> packed =
      Storage::Allocate(device, static_cast<size_t>(st.local_nbytes()));
  if (!packed.ok()) return Annotate(packed.status(), step);
  side.packed = *std::move(packed);
  std::byte* cursor = side.packed->data();
  for (const LocalShard& shard : local) {
    if (shard.tensor.numel() == 0) continue;
    absl::StatusOr<Tensor> view =
        internal::TensorOverBytes(cursor, shard.tensor.shape(), st.dtype(), device);
    absl::Status copied = view.ok() ? view->CopyFrom(shard.tensor) : view.status();
    if (!copied.ok()) return Annotate(copied, step);
    cursor += shard.tensor.nbytes();
  }
  side.send = ConstBuffer(side.packed->data(), side.packed->nbytes(), device);
  return absl::OkStatus();
}

// The destination: its own shards copied into `out`; per other rank a receive buffer, its region
// of `out` when that is contiguous and it holds one shard, else a slice of one staging buffer.
// Errors: as Storage::Allocate and CopyFrom.
absl::Status PrepareReceive(const ShardedTensor& st, int dst, Tensor& out, GatherSide& side) {
  const std::vector<ShardMetadata>& shards = st.shards();
  for (const LocalShard& shard : st.local_shards()) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(out, shards[shard.index]));
    if (region.numel() == 0) continue;
    absl::Status copied = region.CopyFrom(shard.tensor);
    if (!copied.ok()) return Annotate(copied, absl::StrCat("copying own shard ", shard.index));
  }
  const auto by_rank = internal::ShardIndicesByRank(shards, static_cast<int>(side.recvs.size()));
  side.staging_offset.assign(by_rank.size(), -1);
  int64_t staging_bytes = 0;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (static_cast<int>(r) == dst) continue;
    const int64_t nbytes = internal::PackedBytes(shards, by_rank[r], st.dtype());
    if (by_rank[r].size() == 1 && out.IsContiguous() &&
        internal::RegionIsContiguous(st.global_shape(), shards[by_rank[r][0]])) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor region, NarrowToShard(out, shards[by_rank[r][0]]));
      side.recvs[r] = MutableBuffer(region.data(), static_cast<size_t>(nbytes), out.device());
    } else {
      side.staging_offset[r] = staging_bytes;
      staging_bytes += nbytes;
    }
  }
  absl::StatusOr<std::shared_ptr<Storage>> staging =
      Storage::Allocate(out.device(), static_cast<size_t>(staging_bytes));
  if (!staging.ok()) return Annotate(staging.status(), "staging what other ranks send");
  side.staging = *std::move(staging);
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (side.staging_offset[r] >= 0) {
      side.recvs[r] = MutableBuffer(
          side.staging->data() + side.staging_offset[r],
          static_cast<size_t>(internal::PackedBytes(shards, by_rank[r], st.dtype())), out.device());
    }
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

absl::StatusOr<ShardedTensor> ShardedTensor::Zeros(const Shape& global_shape, DType dtype,
                                                   const specs::ShardingSpec& spec, int world_size,
                                                   int rank, const Device& device) {
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec bound, specs::Bind(spec, global_shape, world_size));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<specs::ShardMetadata> shards,
                            specs::BuildMetadata(bound, global_shape));
  std::vector<LocalShard> local;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].placement.rank() != rank) continue;
    SHARDKIT_ASSIGN_OR_RETURN(
        Tensor zeros,
        Tensor::Zeros(shards[i].sizes, dtype, shards[i].placement.device().value_or(device)));
    local.push_back({i, std::move(zeros)});
  }
  return Create(global_shape, dtype, false, std::move(bound), std::move(shards), std::move(local),
                rank);
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
  // Every step that can fail on this rank alone (its `out`, an allocation, a pack) comes before
  // the status round, which makes any failure every rank's same error before a byte moves.
  GatherSide side;
  side.recvs.resize(static_cast<size_t>(comm.world_size()));
  absl::Status ready = PrepareGatherOutput(*this, dst, out, comm);
  if (ready.ok())
    ready = rank == dst ? PrepareReceive(*this, dst, *out, side) : PrepareSend(*this, comm, side);
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, ready, "Gather", options));
  if (rank != dst) return comm.Gather(side.send, {}, dst, options);

  SHARDKIT_RETURN_IF_ERROR(comm.Gather(ConstBuffer(), side.recvs, dst, options));
  const auto by_rank = internal::ShardIndicesByRank(shards_, comm.world_size());
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (side.staging_offset[r] < 0) continue;
    SHARDKIT_RETURN_IF_ERROR(internal::UnpackRegions(side.staging->data() + side.staging_offset[r],
                                                     shards_, by_rank[r], *out));
  }
  return absl::OkStatus();
}

}  // namespace shardkit
