#include "integration/checkpoint/tensor_bytes_reader.h"

#include <algorithm>
#include <cstring>

#include "core/base/status_macros.h"

namespace shardkit::checkpoint {

void TensorBytesReader::Reset(const safetensors::Reader& file,
                              const safetensors::TensorInfo& tensor, int64_t limit) {
  file_ = &file;
  tensor_ = &tensor;
  staged_begin_ = staged_end_ = 0;
  const auto tensor_bytes = static_cast<int64_t>(tensor.end - tensor.begin);
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
  absl::Status read = file_->ReadBytes(*tensor_, static_cast<uint64_t>(staged_begin_),
                                       static_cast<uint64_t>(bytes), staging_.data());
  if (!read.ok()) staged_begin_ = staged_end_ = 0;
  return read;
}

absl::Status TensorBytesReader::Copy(int64_t offset, int64_t size, std::byte* dst) {
  if (size <= 0) return absl::OkStatus();
  const auto tensor_bytes = static_cast<int64_t>(tensor_->end - tensor_->begin);
  const auto staging = static_cast<int64_t>(staging_.size());
  if (size >= kDirectReadBytes || size > staging) {
    bytes_read_ += size;
    return file_->ReadBytes(*tensor_, static_cast<uint64_t>(offset), static_cast<uint64_t>(size),
                            dst);
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
