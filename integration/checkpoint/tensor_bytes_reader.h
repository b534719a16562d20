// TensorBytesReader: copies byte ranges of one tensor's data in a safetensors file into memory —
// long ranges with one pread straight into place, short ones (a shard's rows of a few KiB)
// through a small reused staging buffer that one pread fills for many of them. The streaming
// paths (shard's source, gather) read every byte they need this way, once, and never map a file.
//
//   TensorBytesReader reader(staging);           // staging: caller-owned, reused
//   reader.Reset(file, info, /*limit=*/end);      // the tensor to read from, never past `end`
//   SHARDKIT_RETURN_IF_ERROR(reader.Stage(begin, end));         // optional: one pread for many
//   SHARDKIT_RETURN_IF_ERROR(reader.Copy(offset, bytes, dst));  // in increasing offset order
//
// A short copy outside what is staged stages the staging buffer's size from its offset (never
// past the limit). Copies in increasing offset order, or a Stage of the range the next copies
// fall in, make every byte be read once; any order is correct.
// Not thread-safe; `file` and `staging` must outlive the reader's use of them.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_TENSOR_BYTES_READER_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_TENSOR_BYTES_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "absl/status/status.h"
#include "integration/checkpoint/tensor_source.h"
#include "integration/safetensors/safetensors.h"

namespace shardkit::checkpoint {

// Ranges of at least this many bytes are read straight into place.
inline constexpr int64_t kDirectReadBytes = 64 << 10;

class TensorBytesReader {
 public:
  explicit TensorBytesReader(std::span<std::byte> staging) : staging_(staging) {}

  // Reads from `tensor` of `file` from now on (what was staged is forgotten); staged reads stop at
  // tensor byte `limit` (default: the tensor's end).
  void Reset(const safetensors::Reader& file, const safetensors::TensorInfo& tensor,
             int64_t limit = -1);
  // The same for tensor `t` of `source`.
  void Reset(const TensorSource& source, size_t t, int64_t limit = -1);

  // Reads tensor bytes [begin, end) (at most the staging size) into staging now, and sets the
  // limit to `end`. Errors: as Copy.
  [[nodiscard]] absl::Status Stage(int64_t begin, int64_t end);

  // Copies bytes [offset, offset + size) of the tensor's data to `dst`.
  // Errors: kUnavailable (naming the file) on I/O errors or a truncated file.
  [[nodiscard]] absl::Status Copy(int64_t offset, int64_t size, std::byte* dst);

  // Bytes read from the file so far (staged reads count what they read).
  int64_t bytes_read() const { return bytes_read_; }

 private:
  // Reads tensor bytes [begin, end) (at most the staging size) into staging.
  absl::Status Load(int64_t begin, int64_t end);

  // Reads tensor bytes [offset, offset + size) into dst.
  using ReadFn = std::function<absl::Status(int64_t offset, int64_t size, std::byte* dst)>;
  void Reset(ReadFn read, int64_t tensor_bytes, int64_t limit);

  std::span<std::byte> staging_;
  ReadFn read_;
  int64_t tensor_bytes_ = 0;
  int64_t staged_begin_ = 0;  // tensor bytes [staged_begin_, staged_end_) are in staging_
  int64_t staged_end_ = 0;
  int64_t limit_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_TENSOR_BYTES_READER_H_
