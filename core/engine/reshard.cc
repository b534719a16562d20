#include "core/engine/reshard.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
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

// This rank's side of one reshard: its new shards and the two wires (per peer, the pieces in plan
// order, back to back).
struct Side {
  std::vector<LocalShard> local;   // this rank's new shards, ascending
  std::vector<Tensor*> new_local;  // by new shard index: into `local`, or nullptr
  std::vector<int64_t> send_at, send_bytes, recv_at, recv_bytes;  // by peer
  std::shared_ptr<Storage> send_wire, recv_wire;
};

// Everything this rank can do before bytes move, all of which can fail on this rank alone:
// allocating its new shards and both wires, packing what it sends and copying what it keeps.
// Errors: as Storage::Allocate and Tensor::CopyFrom, naming the step.
absl::Status PrepareSide(const ShardedTensor& tensor, const std::vector<ShardMetadata>& new_shards,
                         const std::vector<Piece>& pieces, const Device& wire_device,
                         Communicator& comm, Side& side) {
  const int me = comm.rank();
  for (size_t j = 0; j < new_shards.size(); ++j) {
    if (new_shards[j].placement.rank() != me) continue;
    absl::StatusOr<Tensor> t =
        Tensor::Empty(new_shards[j].sizes, tensor.dtype(),
                      internal::PlacementDevice(new_shards[j].placement, comm));
    if (!t.ok()) {
      return Annotate(t.status(), absl::StrCat("new shard ", j, " (",
                                               specs::ShardToString(new_shards[j]), ")"));
    }
    side.local.push_back({j, *std::move(t)});
  }
  side.new_local.assign(new_shards.size(), nullptr);
  for (LocalShard& shard : side.local) side.new_local[shard.index] = &shard.tensor;

  const size_t world = static_cast<size_t>(comm.world_size());
  side.send_bytes.assign(world, 0);
  side.recv_bytes.assign(world, 0);
  for (const Piece& p : pieces) {
    const int64_t n = internal::ShardBytes(p.box, tensor.dtype());
    if (p.from == me && p.to != me) side.send_bytes[p.to] += n;
    if (p.to == me && p.from != me) side.recv_bytes[p.from] += n;
  }
  side.send_at.assign(world, 0);
  side.recv_at.assign(world, 0);
  for (size_t r = 1; r < world; ++r) {
    side.send_at[r] = side.send_at[r - 1] + side.send_bytes[r - 1];
    side.recv_at[r] = side.recv_at[r - 1] + side.recv_bytes[r - 1];
  }
  const int64_t send_total = side.send_at[world - 1] + side.send_bytes[world - 1];
  const int64_t recv_total = side.recv_at[world - 1] + side.recv_bytes[world - 1];
  absl::StatusOr<std::shared_ptr<Storage>> send =
      Storage::Allocate(wire_device, static_cast<size_t>(send_total));
  if (!send.ok()) {
    return Annotate(send.status(), "send wire");
  }
  side.send_wire = *std::move(send);
  absl::StatusOr<std::shared_ptr<Storage>> recv =
      Storage::Allocate(wire_device, static_cast<size_t>(recv_total));
  if (!recv.ok()) {
    return Annotate(recv.status(), "receive wire");
  }
  side.recv_wire = *std::move(recv);

  const std::vector<ShardMetadata>& old_shards = tensor.shards();
  std::vector<const Tensor*> old_local(old_shards.size(), nullptr);
  for (const LocalShard& shard : tensor.local_shards()) old_local[shard.index] = &shard.tensor;
  std::byte* send_wire = side.send_wire->data();
  std::vector<int64_t> send_cursor = side.send_at;
  for (const Piece& p : pieces) {
    if (p.from != me) continue;
    std::byte* wire = p.to == me ? nullptr : send_wire + send_cursor[p.to];
    absl::Status copied = CopyPiece(p, old_shards, new_shards, old_local[p.old_index],
                                    p.to == me ? side.new_local[p.new_index] : nullptr, wire,
                                    wire_device, tensor.dtype());
    if (!copied.ok()) {
      return Annotate(copied, absl::StrCat("packing old shard ", p.old_index, " for rank ", p.to));
    }
    if (p.to != me) send_cursor[p.to] += internal::ShardBytes(p.box, tensor.dtype());
  }
  return absl::OkStatus();
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

  // The wire lives where this rank's old shards do (else the backend's default device); new shards
  // where their placements say.
  const Device wire_device = tensor.local_shards().empty()
                                 ? comm.DefaultDevice()
                                 : tensor.local_shards().front().tensor.device();
  const std::vector<Piece> pieces = PlanPieces(tensor.shards(), *new_shards);
  // A failure here is this rank's alone: the status round turns it into every rank's same error
  // before any byte moves (ShardParameters carries its receive allocations into its agreement).
  Side side;
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(
      comm, PrepareSide(tensor, *new_shards, pieces, wire_device, comm, side), "Reshard", options));

  const size_t world = static_cast<size_t>(comm.world_size());
  std::byte* send_wire = side.send_wire->data();
  std::byte* recv_wire = side.recv_wire->data();
  std::vector<ConstBuffer> sends(world);
  std::vector<MutableBuffer> recvs(world);
  for (size_t r = 0; r < world; ++r) {
    sends[r] = ConstBuffer(send_wire + side.send_at[r], static_cast<size_t>(side.send_bytes[r]),
                           wire_device);
    recvs[r] = MutableBuffer(recv_wire + side.recv_at[r], static_cast<size_t>(side.recv_bytes[r]),
                             wire_device);
  }
  SHARDKIT_RETURN_IF_ERROR(comm.AllToAll(sends, recvs, options));
  std::vector<int64_t> recv_cursor = side.recv_at;
  for (const Piece& p : pieces) {
    if (p.to != me || p.from == me) continue;
    SHARDKIT_RETURN_IF_ERROR(CopyPiece(p, tensor.shards(), *new_shards, nullptr,
                                       side.new_local[p.new_index], recv_wire + recv_cursor[p.from],
                                       wire_device, tensor.dtype()));
    recv_cursor[p.from] += internal::ShardBytes(p.box, tensor.dtype());
  }
  return ShardedTensor::Create(tensor.global_shape(), tensor.dtype(), tensor.requires_grad(),
                               *std::move(bound), *std::move(new_shards), std::move(side.local),
                               me);
}

}  // namespace shardkit
