#include "core/engine/reshard.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/descriptor_agreement.h"
#include "core/engine/internal/shard_copy.h"
#include "specs/layout.h"
#include "specs/spec_json.h"

namespace shardkit {
namespace {

using specs::ShardMetadata;

// The region two shards share, if it has positive volume.
std::optional<ShardMetadata> Intersect(const ShardMetadata& a, const ShardMetadata& b) {
  ShardMetadata box{a.offsets, a.sizes, b.placement};
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    box.offsets[d] = lo;
    box.sizes[d] = hi - lo;
  }
  return box;
}

// `box` (global coordinates) relative to `shard`'s origin.
ShardMetadata Relative(const ShardMetadata& box, const ShardMetadata& shard) {
  ShardMetadata rel = box;
  for (size_t d = 0; d < box.offsets.size(); ++d) rel.offsets[d] -= shard.offsets[d];
  return rel;
}

struct Piece {
  size_t old_index;
  size_t new_index;
  ShardMetadata box;
  int from;
  int to;
};

// Every intersection, in (new shard, old shard) order: the wire order of every pair of ranks.
std::vector<Piece> PlanPieces(const std::vector<ShardMetadata>& old_shards,
                              const std::vector<ShardMetadata>& new_shards) {
  std::vector<Piece> pieces;
  for (size_t j = 0; j < new_shards.size(); ++j) {
    for (size_t i = 0; i < old_shards.size(); ++i) {
      if (auto box = Intersect(old_shards[i], new_shards[j])) {
        pieces.push_back({i, j, *std::move(box), static_cast<int>(old_shards[i].placement.rank()),
                          static_cast<int>(new_shards[j].placement.rank())});
      }
    }
  }
  return pieces;
}

// Copies `piece` between the old shard tensor and a contiguous buffer or the new shard tensor.
absl::Status CopyPiece(const Piece& piece, const std::vector<ShardMetadata>& old_shards,
                       const std::vector<ShardMetadata>& new_shards, const Tensor* old_tensor,
                       Tensor* new_tensor, std::byte* wire, const Device& wire_device,
                       DType dtype) {
  Tensor from;
  Tensor to;
  if (old_tensor != nullptr) {
    SHARDKIT_ASSIGN_OR_RETURN(
        from, NarrowToShard(*old_tensor, Relative(piece.box, old_shards[piece.old_index])));
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(from,
                              internal::TensorOverBytes(wire, piece.box.sizes, dtype, wire_device));
  }
  if (new_tensor != nullptr) {
    SHARDKIT_ASSIGN_OR_RETURN(
        to, NarrowToShard(*new_tensor, Relative(piece.box, new_shards[piece.new_index])));
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(to,
                              internal::TensorOverBytes(wire, piece.box.sizes, dtype, wire_device));
  }
  return to.CopyFrom(from);
}

}  // namespace

absl::StatusOr<ShardedTensor> Reshard(const ShardedTensor& tensor,
                                      const specs::ShardingSpec& new_spec, Communicator& comm,
                                      const CallOptions& options) {
  const int me = comm.rank();
  std::vector<std::string> errors;
  absl::StatusOr<specs::ShardingSpec> bound =
      specs::Bind(new_spec, tensor.global_shape(), comm.world_size());
  absl::StatusOr<std::vector<ShardMetadata>> new_shards =
      bound.ok() ? specs::BuildMetadata(*bound, tensor.global_shape())
                 : absl::StatusOr<std::vector<ShardMetadata>>(bound.status());
  if (!new_shards.ok()) errors.push_back(absl::StrCat("new spec: ", new_shards.status().message()));
  nlohmann::json descriptor = {{"shape", tensor.global_shape()},
                               {"dtype", DTypeName(tensor.dtype())},
                               {"from", specs::CanonicalJson(tensor.spec())},
                               {"to", specs::CanonicalJson(bound.ok() ? *bound : new_spec)}};
  SHARDKIT_RETURN_IF_ERROR(
      internal::AgreeOnDescriptor(comm, descriptor, errors, "Reshard", options));

  const std::vector<ShardMetadata>& old_shards = tensor.shards();
  std::vector<const Tensor*> old_local(old_shards.size(), nullptr);
  for (const LocalShard& shard : tensor.local_shards()) old_local[shard.index] = &shard.tensor;
  // The wire lives where this rank's old shards do (else the backend's default device); new shards
  // where their placements say.
  const Device wire_device = tensor.local_shards().empty()
                                 ? internal::DefaultDevice(comm)
                                 : tensor.local_shards().front().tensor.device();
  std::vector<LocalShard> local;
  std::vector<Tensor*> new_local(new_shards->size(), nullptr);
  for (size_t j = 0; j < new_shards->size(); ++j) {
    if ((*new_shards)[j].placement.rank() != me) continue;
    SHARDKIT_ASSIGN_OR_RETURN(
        Tensor t, Tensor::Empty((*new_shards)[j].sizes, tensor.dtype(),
                                internal::PlacementDevice((*new_shards)[j].placement, comm)));
    local.push_back({j, std::move(t)});
  }
  for (LocalShard& shard : local) new_local[shard.index] = &shard.tensor;

  // Wire layout: per peer, the pieces in plan order, back to back.
  const std::vector<Piece> pieces = PlanPieces(old_shards, *new_shards);
  const size_t world = static_cast<size_t>(comm.world_size());
  std::vector<int64_t> send_bytes(world, 0), recv_bytes(world, 0);
  for (const Piece& p : pieces) {
    const int64_t n = internal::ShardBytes(p.box, tensor.dtype());
    if (p.from == me && p.to != me) send_bytes[p.to] += n;
    if (p.to == me && p.from != me) recv_bytes[p.from] += n;
  }
  std::vector<int64_t> send_at(world, 0), recv_at(world, 0);
  for (size_t r = 1; r < world; ++r) {
    send_at[r] = send_at[r - 1] + send_bytes[r - 1];
    recv_at[r] = recv_at[r - 1] + recv_bytes[r - 1];
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      std::shared_ptr<Storage> send_storage,
      Storage::Allocate(wire_device,
                        static_cast<size_t>(send_at[world - 1] + send_bytes[world - 1])));
  SHARDKIT_ASSIGN_OR_RETURN(
      std::shared_ptr<Storage> recv_storage,
      Storage::Allocate(wire_device,
                        static_cast<size_t>(recv_at[world - 1] + recv_bytes[world - 1])));
  std::byte* send_wire = static_cast<std::byte*>(send_storage->data());
  std::byte* recv_wire = static_cast<std::byte*>(recv_storage->data());
  std::vector<int64_t> send_cursor = send_at;
  for (const Piece& p : pieces) {
    if (p.from != me) continue;
    std::byte* wire = p.to == me ? nullptr : send_wire + send_cursor[p.to];
    SHARDKIT_RETURN_IF_ERROR(CopyPiece(p, old_shards, *new_shards, old_local[p.old_index],
                                       p.to == me ? new_local[p.new_index] : nullptr, wire,
                                       wire_device, tensor.dtype()));
    if (p.to != me) send_cursor[p.to] += internal::ShardBytes(p.box, tensor.dtype());
  }
  std::vector<ConstBuffer> sends(world);
  std::vector<MutableBuffer> recvs(world);
  for (size_t r = 0; r < world; ++r) {
    sends[r] = ConstBuffer(send_wire + send_at[r], static_cast<size_t>(send_bytes[r]), wire_device);
    recvs[r] =
        MutableBuffer(recv_wire + recv_at[r], static_cast<size_t>(recv_bytes[r]), wire_device);
  }
  SHARDKIT_RETURN_IF_ERROR(comm.AllToAll(sends, recvs, options));
  std::vector<int64_t> recv_cursor = recv_at;
  for (const Piece& p : pieces) {
    if (p.to != me || p.from == me) continue;
    SHARDKIT_RETURN_IF_ERROR(CopyPiece(p, old_shards, *new_shards, nullptr, new_local[p.new_index],
                                       recv_wire + recv_cursor[p.from], wire_device,
                                       tensor.dtype()));
    recv_cursor[p.from] += internal::ShardBytes(p.box, tensor.dtype());
  }
  return ShardedTensor::Create(tensor.global_shape(), tensor.dtype(), tensor.requires_grad(),
                               *std::move(bound), *std::move(new_shards), std::move(local), me);
}

}  // namespace shardkit
