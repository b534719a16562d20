// ByteRuns: where a box's bytes lie inside a row-major tensor — the one box-to-runs geometry of the
// tree: weight sync's packing, unpacking and gathered sends (core/engine), and the checkpoint
// streams that move bytes between files and windows without ever holding a whole tensor.
//
// A box (offsets, sizes; a shard) of a contiguous tensor of `shape` is `count` runs of `length`
// bytes:
// run n starts Offset(n) bytes into the tensor, and runs are in increasing order, the same order as
// the shard's own row-major bytes — so run n is bytes [n * length, (n + 1) * length) of the shard
// as it is stored on its own (in a rank file). A range [begin, end) of the tensor's bytes therefore
// holds one contiguous range of the shard's bytes (ShardSpan), however many runs it cuts.
//
//   ByteRuns runs = RunsOf({4096, 4096}, 4, shard);    // chunk on dim 1 of 4: 4096 runs of 4 KiB
//   ForEachPiece(runs, begin, end, [&](int64_t tensor_at, int64_t shard_at, int64_t n) { ... });
//   ForEachRun(runs, [&](int64_t tensor_at, int64_t n) { ... });  // every run, in order
#ifndef SHARDKIT_CORE_TENSOR_BYTE_RUNS_H_
#define SHARDKIT_CORE_TENSOR_BYTE_RUNS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/tensor/shape.h"

namespace shardkit {

struct ByteRuns {
  int64_t length = 0;  // bytes per run (0 for an empty shard)
  int64_t count = 0;   // runs (0 for an empty shard)
  int64_t base = 0;    // byte offset of the shard's first byte in the tensor
  Shape outer_sizes;   // the index space of the runs (the shard's sizes of the leading dims)
  std::vector<int64_t> outer_strides;  // the tensor's byte strides of those dims

  // Byte offset in the tensor of run n (0 <= n < count).
  int64_t Offset(int64_t n) const;
  // The first run that ends after tensor byte `at` (count if none).
  int64_t FirstEndingAfter(int64_t at) const;
  int64_t bytes() const { return length * count; }
};

// The runs of the box at `offsets` with `sizes` (validated: inside `shape`) of a contiguous tensor
// of `shape` whose elements are `element_bits` bits (sub-byte dtypes are packed: 4 or 6 bits).
// Errors: kInvalidArgument when a run would start or end inside a byte (a sub-byte tensor's shard
// must start and end on byte boundaries in the flat element order), naming the bit offset.
[[nodiscard]] absl::StatusOr<ByteRuns> RunsOf(const Shape& shape, int64_t element_bits,
                                              std::span<const int64_t> offsets,
                                              std::span<const int64_t> sizes);
// The same for anything with `offsets` and `sizes` (specs::ShardMetadata, specs::Box).
template <typename Box>
[[nodiscard]] absl::StatusOr<ByteRuns> RunsOf(const Shape& shape, int64_t element_bits,
                                              const Box& box) {
  return RunsOf(shape, element_bits, box.offsets, box.sizes);
}

// Calls fn(tensor_offset, bytes) for every run, in order (no division per run).
void ForEachRun(const ByteRuns& runs, absl::FunctionRef<void(int64_t, int64_t)> fn);

// The shard's bytes inside tensor bytes [begin, end): {first index in the shard's own bytes,
// count}. {k, 0} when none.
std::pair<int64_t, int64_t> ShardSpan(const ByteRuns& runs, int64_t begin, int64_t end);

// Calls fn(tensor_offset, shard_offset, bytes) for every maximal piece of the shard inside tensor
// bytes [begin, end), in increasing order (shard offsets follow each other).
void ForEachPiece(const ByteRuns& runs, int64_t begin, int64_t end,
                  absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn);

// Calls fn(i, tensor_offset, shard_offset, bytes) for every maximal piece of every shard runs[i]
// inside tensor bytes [begin, end), all shards' pieces merged in increasing tensor offset — the
// order a reader of the tensor meets them in (runs of chunks on a dim > 0 interleave).
void ForEachPieceInOrder(std::span<const ByteRuns* const> runs, int64_t begin, int64_t end,
                         absl::FunctionRef<void(size_t, int64_t, int64_t, int64_t)> fn);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_BYTE_RUNS_H_
