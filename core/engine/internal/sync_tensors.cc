#include "core/engine/internal/sync_tensors.h"

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "core/tensor/byte_runs.h"
#include "core/tensor/host_copy.h"

namespace shardkit::internal {
namespace {

// `box` relative to the tensor's origin (`origin` nullptr: 0).
absl::InlinedVector<int64_t, 8> Relative(const specs::Box& box, const Shape* origin) {
  absl::InlinedVector<int64_t, 8> rel(box.offsets.begin(), box.offsets.end());
  if (origin != nullptr) {
    for (size_t d = 0; d < rel.size(); ++d) rel[d] -= (*origin)[d];
  }
  return rel;
}

// The runs of `box` in `t`'s tensor (whole elements of whole bytes: never misaligned).
ByteRuns BoxRuns(const SideTensors::Resolved& t, const specs::Box& box) {
  const int64_t element_bits = 8 * static_cast<int64_t>(ElementSize(t.tensor->dtype()));
  absl::StatusOr<ByteRuns> runs =
      RunsOf(t.tensor->shape(), element_bits, Relative(box, t.offsets), box.sizes);
  SHARDKIT_CHECK(runs.ok()) << runs.status();
  return *std::move(runs);
}

}  // namespace

absl::StatusOr<SideTensors::Resolved> SideTensors::Get(size_t parameter, size_t shard) {
  for (const auto& [index, r] : cache_[parameter]) {
    if (index == shard) return r;
  }
  SHARDKIT_ASSIGN_OR_RETURN(Resolved r, Find(parameter, shard));
  cache_[parameter].emplace_back(shard, r);
  return r;
}

absl::StatusOr<SideTensors::Resolved> SideTensors::Find(size_t parameter, size_t shard) {
  const std::string& name = plan_.names()[parameter];
  if (module_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no ", side_, " module on this rank"));
  }
  size_t& at = positions_[parameter];
  if (at >= module_->size() || module_->names()[at] != name) {
    std::optional<size_t> found = module_->PositionOf(name);
    if (!found) {
      return absl::FailedPreconditionError(
          absl::StrCat(side_, " parameter ", QuoteName(name), " is not in the module"));
    }
    at = *found;
  }
  Resolved r{module_->TensorAt(at), nullptr};
  if (const ShardedTensor* st = module_->ShardedAt(at)) {
    r.tensor = nullptr;
    for (const LocalShard& local : st->local_shards()) {
      if (local.index == shard) r = {&local.tensor, &st->shards()[shard].offsets};
    }
  }
  if (r.tensor == nullptr || !r.tensor->IsContiguous()) {
    return absl::FailedPreconditionError(
        absl::StrCat(side_, " parameter ", QuoteName(name), ": this rank's shard ", shard,
                     " is missing or not contiguous (not the module the plan was made with)"));
  }
  return r;
}

// The view of `box` in `t`.
absl::StatusOr<Tensor> View(const SideTensors::Resolved& t, const specs::Box& box) {
  const absl::InlinedVector<int64_t, 8> offsets = Relative(box, t.offsets);
  return NarrowToShard(*t.tensor, {Shape(offsets.begin(), offsets.end()), box.sizes});
}

// Where a contiguous piece starts in its tensor.
std::byte* PieceStart(const SideTensors::Resolved& t, const specs::Box& box) {
  return t.tensor->data() + BoxRuns(t, box).base;
}

bool BoxInside(const SideTensors::Resolved& t, const specs::Box& box) {
  const absl::InlinedVector<int64_t, 8> offsets = Relative(box, t.offsets);
  const Shape& shape = t.tensor->shape();
  if (offsets.size() != shape.size()) return false;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (offsets[d] < 0 || offsets[d] + box.sizes[d] > shape[d]) return false;
  }
  return true;
}

void PieceRuns(const SideTensors::Resolved& t, const specs::Box& box, std::vector<HostRun>& runs) {
  const std::byte* base = t.tensor->data();
  ForEachRun(BoxRuns(t, box), [&](int64_t offset, int64_t n) {
    runs.push_back({base + offset, static_cast<size_t>(n)});
  });
}

// Copies the piece's box of `t` to the contiguous `bytes` (to_bytes) or back. On the CPU run by
// run; on a device through Tensor views and the device's allocator.
absl::Status CopyPiece(const SideTensors::Resolved& t, const specs::Box& box, std::byte* bytes,
                       const Device& bytes_device, bool to_bytes) {
  const int64_t element = static_cast<int64_t>(ElementSize(t.tensor->dtype()));
  if (t.tensor->device().is_cpu() && bytes_device.is_cpu()) {
    std::byte* base = t.tensor->data();
    int64_t total = element;
    for (int64_t size : box.sizes) total *= size;
    // A large piece writes around the cache (core/tensor/host_copy.h).
    const HostRunCopier copier(static_cast<size_t>(total), /*overlapping=*/false);
    int64_t at = 0;
    ForEachRun(BoxRuns(t, box), [&](int64_t offset, int64_t n) {
      const size_t bytes_n = static_cast<size_t>(n);
      if (to_bytes) {
        copier.Copy(bytes + at, base + offset, bytes_n);
      } else {
        copier.Copy(base + offset, bytes + at, bytes_n);
      }
      at += n;
    });
    copier.Finish();
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(Tensor view, View(t, box));
  SHARDKIT_ASSIGN_OR_RETURN(
      Tensor flat, internal::TensorOverBytes(bytes, box.sizes, t.tensor->dtype(), bytes_device));
  return to_bytes ? flat.CopyFrom(view) : view.CopyFrom(flat);
}

}  // namespace shardkit::internal
