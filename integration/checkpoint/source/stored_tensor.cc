#include "integration/checkpoint/source/stored_tensor.h"

#include <utility>

#include "core/base/status_macros.h"
#include "core/tensor/byte_runs.h"

namespace shardkit::checkpoint {

absl::StatusOr<StoredTensor> MakeStoredTensor(std::string name, DType dtype, Shape shape,
                                              uint64_t begin, uint64_t end,
                                              std::vector<specs::ShardMetadata> boxes) {
  StoredTensor out;
  SHARDKIT_ASSIGN_OR_RETURN(out.layout, MakeStreamTensor(std::move(name), dtype, shape, begin, end,
                                                         /*replicated=*/false, std::move(boxes)));
  out.boxes = specs::ShardBoxIndex::FromShards(out.layout.shards);
  // A row of dim 0 in whole bytes: a byte range then maps to the rows it lies in.
  if (!shape.empty() && shape[0] > 0) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize size, ComputeShapeSize(shape, dtype));
    const int64_t row_bits = size.numel / shape[0] * ElementBits(dtype);
    if (row_bits % 8 == 0) out.row_bytes = row_bits / 8;
  }
  return out;
}

namespace {

// The part of box `s` inside tensor bytes [offset, offset + size), each piece at its place in dst.
absl::Status ReadBox(const StoredTensor& tensor, size_t s, int64_t offset, int64_t size,
                     std::byte* dst, TensorBytesReader& reader,
                     absl::FunctionRef<void(size_t, int64_t)> reset) {
  const ByteRuns& runs = tensor.layout.runs[s];
  const auto [first, count] = ShardSpan(runs, offset, offset + size);
  if (count == 0) return absl::OkStatus();
  reset(s, first + count);
  // The pieces follow each other in the box's bytes: staging-sized preads of exactly them.
  absl::Status status;
  ForEachPiece(runs, offset, offset + size, [&](int64_t tensor_at, int64_t box_at, int64_t n) {
    if (status.ok()) status = reader.Want(box_at, n, dst + (tensor_at - offset));
  });
  if (!status.ok()) return status;  // a failed Want left nothing pending
  return reader.Flush();
}

}  // namespace

absl::Status ReadFromBoxes(const StoredTensor& tensor, int64_t offset, int64_t size, std::byte* dst,
                           TensorBytesReader& reader,
                           absl::FunctionRef<void(size_t, int64_t)> reset) {
  if (size <= 0) return absl::OkStatus();
  // The box of the rows of dim 0 that bytes [offset, offset + size) lie in (all of them when a
  // row is not whole bytes); the boxes it meets hold every byte of the range.
  const Shape& shape = tensor.layout.shape;
  specs::Box rows{Shape(shape.size(), 0), shape};
  if (tensor.row_bytes > 0) {
    rows.offsets[0] = offset / tensor.row_bytes;
    rows.sizes[0] = (offset + size - 1) / tensor.row_bytes + 1 - rows.offsets[0];
  }
  for (const specs::BoxHit& hit : tensor.boxes.Intersecting(rows)) {
    // Only boxes whose bytes, first to last, overlap the range.
    const ByteRuns& runs = tensor.layout.runs[hit.shard];
    if (runs.bytes() == 0 || runs.Offset(0) >= offset + size ||
        runs.Offset(runs.count - 1) + runs.length <= offset) {
      continue;
    }
    SHARDKIT_RETURN_IF_ERROR(ReadBox(tensor, hit.shard, offset, size, dst, reader, reset));
  }
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
