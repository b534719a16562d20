#include "integration/checkpoint/stream/tensor_bytes_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/base/check.h"
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

bool JoinsRead(const CoalescedRead& read, int64_t at, int64_t bytes, int64_t staging) {
  if (read.pieces == 0 || bytes >= kDirectReadBytes || read.pieces >= kMaxPiecesPerRead) {
    return false;
  }
  if (read.pieces == 1 && read.wanted >= kDirectReadBytes) return false;  // read alone
  const int64_t end = std::max(read.end, at + bytes);
  if (end - read.begin > staging) return false;
  return at - read.end < kPageBytes || (end - read.begin) * 4 <= (read.wanted + bytes) * 5;
}

void TensorBytesReader::Reset(ReadFn read, int64_t tensor_bytes, int64_t limit) {
  SHARDKIT_CHECK(pending_.empty()) << "TensorBytesReader: Reset with pieces not flushed";
  read_ = std::move(read);
  tensor_bytes_ = tensor_bytes;
  staged_begin_ = staged_end_ = 0;
  limit_ = limit < 0 ? tensor_bytes : std::min(limit, tensor_bytes);
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
  const bool staged = offset >= staged_begin_ && offset + size <= staged_end_;
  // Straight into place when long, or when staging would hold nothing but this copy.
  if (size >= kDirectReadBytes || size > staging ||
      (!staged && std::min(limit_, offset + staging) <= offset + size)) {
    bytes_read_ += size;
    return read_(offset, size, dst);
  }
  if (!staged) {
    // Stage from here to the limit, at most the staging size, and at least this copy.
    const int64_t end = std::max(offset + size, std::min(limit_, offset + staging));
    SHARDKIT_RETURN_IF_ERROR(Load(offset, std::min(end, tensor_bytes)));
  }
  std::memcpy(dst, staging_.data() + (offset - staged_begin_), static_cast<size_t>(size));
  return absl::OkStatus();
}

absl::Status TensorBytesReader::Want(int64_t offset, int64_t size, std::byte* dst) {
  if (size <= 0) return absl::OkStatus();
  if (!JoinsRead(coalesced_, offset, size, static_cast<int64_t>(staging_.size()))) {
    SHARDKIT_RETURN_IF_ERROR(Flush());
    coalesced_ = {offset, offset, 0, 0};
  }
  coalesced_.end = std::max(coalesced_.end, offset + size);
  coalesced_.wanted += size;
  ++coalesced_.pieces;
  pending_.push_back({offset, size, dst});
  return absl::OkStatus();
}

absl::Status TensorBytesReader::Flush() {
  const CoalescedRead read = std::exchange(coalesced_, {});
  absl::Status status;
  if (pending_.size() == 1) {  // alone: straight into place
    bytes_read_ += pending_[0].size;
    status = read_(pending_[0].offset, pending_[0].size, pending_[0].dst);
  } else if (!pending_.empty()) {
    status = Load(read.begin, read.end);
    for (size_t i = 0; status.ok() && i < pending_.size(); ++i) {
      std::memcpy(pending_[i].dst, staging_.data() + (pending_[i].offset - staged_begin_),
                  static_cast<size_t>(pending_[i].size));
    }
  }
  pending_.clear();  // keeps its capacity: no allocation per read
  return status;
}

}  // namespace shardkit::checkpoint
