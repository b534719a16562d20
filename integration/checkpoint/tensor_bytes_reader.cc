#include "integration/checkpoint/tensor_bytes_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/base/status_macros.h"

namespace shardkit::checkpoint {

void TensorBytesReader::Reset(const safetensors::Reader& file,
                              const safetensors::TensorInfo& tensor, int64_t limit) {
  Reset(
      [&file, &tensor](int64_t offset, int64_t size, std::byte* dst) {
        return file.ReadBytes(tensor, static_cast<uint64_t>(offset), static_cast<uint64_t>(size),
                              dst);
      },
      static_cast<int64_t>(tensor.end - tensor.begin), limit);
}

void TensorBytesReader::Reset(const TensorSource& source, size_t t, int64_t limit) {
  const safetensors::TensorInfo& info = source.header().tensors[t];
  Reset([&source, t](int64_t offset, int64_t size,
                     std::byte* dst) { return source.ReadBytes(t, offset, size, dst); },
        static_cast<int64_t>(info.end - info.begin), limit);
}

void TensorBytesReader::Reset(ReadFn read, int64_t tensor_bytes, int64_t limit) {
  read_ = std::move(read);
  tensor_bytes_ = tensor_bytes;
  staged_begin_ = staged_end_ = 0;
  limit_ = limit < 0 ? tensor_bytes : std::min(limit, tensor_bytes);
}

absl::Status TensorBytesReader::Stage(int64_t begin, int64_t end) {
  limit_ = end;
  return Load(begin, end);
}

absl::Status TensorBytesReader::Load(int64_t begin, int64_t end) {
  staged_begin_ = begin;
  staged_end_ = std::min(end, begin + static_cast<int64_t>(staging_.size()));
  const int64_t bytes = staged_end_ - staged_begin_;
  bytes_read_ += bytes;
  absl::Status read = read_(staged_begin_, bytes, staging_.data());
  if (!read.ok()) staged_begin_ = staged_end_ = 0;
  return read;
}

absl::Status TensorBytesReader::Copy(int64_t offset, int64_t size, std::byte* dst) {
  if (size <= 0) return absl::OkStatus();
  const int64_t tensor_bytes = tensor_bytes_;
  const auto staging = static_cast<int64_t>(staging_.size());
  if (size >= kDirectReadBytes || size > staging) {
    bytes_read_ += size;
    return read_(offset, size, dst);
  }
  if (offset < staged_begin_ || offset + size > staged_end_) {
    // Stage from here to the limit, at most the staging size, and at least this copy.
    const int64_t end = std::max(offset + size, std::min(limit_, offset + staging));
    SHARDKIT_RETURN_IF_ERROR(Load(offset, std::min(end, tensor_bytes)));
  }
  std::memcpy(dst, staging_.data() + (offset - staged_begin_), static_cast<size_t>(size));
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
