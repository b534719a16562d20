// StoredTensor: a tensor kept as boxes (the shards of a shard directory, the chunks of a DCP
// checkpoint), each box's values row-major somewhere of their own — and the read of any range of
// the whole tensor's row-major bytes from the boxes that hold it. ShardDirSource and DcpSource
// are both this, with their own files behind each box.
//
//   SHARDKIT_ASSIGN_OR_RETURN(StoredTensor t, MakeStoredTensor(name, dtype, shape, begin, end,
//                                                               boxes));
//   SHARDKIT_RETURN_IF_ERROR(ReadFromBoxes(t, offset, n, dst, reader,
//                                          [&](size_t box, int64_t limit) {
//                                            reader.Reset(/* box's bytes */, limit);
//                                          }));
//
// A read touches only the boxes it overlaps: the boxes are indexed (specs/shard_box_index.h) and a
// read of tensor bytes looks up the rows of dim 0 those bytes lie in, so finding them is a binary
// search per dimension plus the boxes found — never all pairs of boxes. From each box the read
// takes one contiguous range of the box's own bytes (core/tensor/byte_runs.h) and nothing else: the
// pieces go through TensorBytesReader::Want (one pread straight into place for a long piece, staged
// reads of exactly the short ones).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_STORED_TENSOR_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_STORED_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/tensor_bytes_reader.h"
#include "specs/shard_box_index.h"
#include "specs/shard_metadata.h"

namespace shardkit::checkpoint {

struct StoredTensor {
  StreamTensor layout;         // the boxes (as shards) and their byte runs in the whole tensor
  specs::ShardBoxIndex boxes;  // the same boxes, indexed
  int64_t row_bytes = 0;       // bytes per index of dim 0 when whole bytes (else 0: any row)
};

// A tensor of `dtype` and `shape` at bytes [begin, end) of a virtual data region, kept as `boxes`
// (which must tile it; the callers check that). Errors: as MakeStreamTensor's (a sub-byte box
// that does not start and end on byte boundaries).
[[nodiscard]] absl::StatusOr<StoredTensor> MakeStoredTensor(
    std::string name, DType dtype, Shape shape, uint64_t begin, uint64_t end,
    std::vector<specs::ShardMetadata> boxes);

// Copies the tensor's row-major bytes [offset, offset + size) to `dst` (which receives byte
// `offset` first): for every box holding some of them, `reset(box, limit)` points `reader` at
// that box's own bytes (reading none past `limit`), then the box's pieces are read through it.
// Errors: the reader's (kUnavailable or kInvalidArgument naming the file).
[[nodiscard]] absl::Status ReadFromBoxes(const StoredTensor& tensor, int64_t offset, int64_t size,
                                         std::byte* dst, TensorBytesReader& reader,
                                         absl::FunctionRef<void(size_t box, int64_t limit)> reset);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_STORED_TENSOR_H_
