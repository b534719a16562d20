// Internal: the contiguous runs of a box inside a row-major tensor, for weight sync's packing and
// unpacking on the CPU without building a Tensor per piece.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_BOX_RUNS_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_BOX_RUNS_H_

#include <cstdint>
#include <span>

#include "absl/functional/function_ref.h"
#include "core/tensor/shape.h"

namespace shardkit::internal {

// Calls fn(byte offset, bytes) for every contiguous run of the box at `offsets` with `sizes`
// (relative to the tensor's origin) inside a contiguous row-major tensor of `tensor_sizes`, in
// row-major order; adjacent whole rows are merged into one run. Nothing for an empty box.
void ForEachBoxRun(std::span<const int64_t> tensor_sizes, std::span<const int64_t> offsets,
                   std::span<const int64_t> sizes, int64_t element_size,
                   absl::FunctionRef<void(int64_t, int64_t)> fn);

// The byte offset of the box's first element (its `offsets`) in such a tensor.
int64_t BoxStartOffset(std::span<const int64_t> tensor_sizes, std::span<const int64_t> offsets,
                       int64_t element_size);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_BOX_RUNS_H_
