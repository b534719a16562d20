#include "integration/checkpoint/tensor_bytes_reader.h"

#include <algorithm>
#include <cstring>

#include "core/base/status_macros.h"

namespace shardkit::checkpoint {

void TensorBytesReader::Reset(const safetensors::Reader& file,
                              const safetensors::TensorInfo& tensor) {
  file_ = &file;
  tensor_ = &tensor;
  staged_begin_ = staged_end_ = 0;
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
    staged_begin_ = offset;
    staged_end_ = std::min(tensor_bytes, offset + staging);
    const int64_t bytes = staged_end_ - staged_begin_;
    bytes_read_ += bytes;
    absl::Status read = file_->ReadBytes(*tensor_, static_cast<uint64_t>(staged_begin_),
                                         static_cast<uint64_t>(bytes), staging_.data());
    if (!read.ok()) {
      staged_begin_ = staged_end_ = 0;
      return read;
    }
  }
  std::memcpy(dst, staging_.data() + (offset - staged_begin_), static_cast<size_t>(size));
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
