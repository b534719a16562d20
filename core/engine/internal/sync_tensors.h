// Internal: where weight sync finds a piece's bytes in a rank's module — each parameter's local
// tensor of a shard, resolved once per call — and how it copies a piece between its box in that
// tensor and contiguous staging (Sync's packing, unpacking and local copies; verify's digests).
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_TENSORS_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_TENSORS_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"
#include "core/tensor/tensor.h"
#include "specs/shard_box_index.h"

namespace shardkit::internal {

// One side's local tensors, resolved once per call: (parameter, shard) -> the tensor and its
// offsets, pointing into the module (which outlives the call). A parameter's position in the
// module is remembered in the plan across calls and checked by name, so a call costs no hashing
// when the module is the same. Used by one thread only (the packer for the source, the caller's
// thread for the destination).
class SideTensors {
 public:
  struct Resolved {
    const Tensor* tensor;
    const Shape* offsets;  // nullptr: the origin (a replicated parameter)
  };

  SideTensors(const SyncPlan& plan, const Module* module, std::vector<size_t>& positions,
              const char* side)
      : plan_(plan),
        module_(module),
        positions_(positions),
        side_(side),
        cache_(plan.names().size()) {
    positions_.resize(plan.names().size(), SIZE_MAX);
  }

  // The tensor of (parameter, shard) and its offsets. Errors: kFailedPrecondition naming the
  // parameter when this rank's module lacks it or that shard, or the shard is not contiguous.
  absl::StatusOr<Resolved> Get(size_t parameter, size_t shard);

 private:
  absl::StatusOr<Resolved> Find(size_t parameter, size_t shard);

  const SyncPlan& plan_;
  const Module* module_;
  std::vector<size_t>& positions_;
  const char* side_;
  std::vector<absl::InlinedVector<std::pair<size_t, Resolved>, 1>> cache_;
};

// The view of `box` (global coordinates) in `t`.
[[nodiscard]] absl::StatusOr<Tensor> View(const SideTensors::Resolved& t, const specs::Box& box);

// Where a piece contiguous in its tensor starts.
std::byte* PieceStart(const SideTensors::Resolved& t, const specs::Box& box);

// Whether the piece's box lies inside `t` (a module of other shapes than the plan's would make a
// piece reach outside its tensor).
bool BoxInside(const SideTensors::Resolved& t, const specs::Box& box);

// Appends the runs of the piece's box of `t` (host memory) to `runs`, in order: what a backend
// that gathers (PreparedTransfer::Gathers) writes instead of a packed copy.
void PieceRuns(const SideTensors::Resolved& t, const specs::Box& box, std::vector<HostRun>& runs);

// Copies the piece's box of `t` to the contiguous `bytes` (to_bytes) or back. On the CPU run by
// run; on a device through Tensor views and the device's allocator.
[[nodiscard]] absl::Status CopyPiece(const SideTensors::Resolved& t, const specs::Box& box,
                                     std::byte* bytes, const Device& bytes_device, bool to_bytes);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_TENSORS_H_
