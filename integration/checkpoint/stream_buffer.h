// StreamBuffer: uninitialised memory a streaming path allocates once and reuses for every round,
// so that only what a round uses is ever touched (first touch of fresh memory is the dominant cost
// on these machines: docs/performance.md). Asks for transparent huge pages: fewer faults.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_BUFFER_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_BUFFER_H_

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace shardkit::checkpoint {

class StreamBuffer {
 public:
  explicit StreamBuffer(int64_t bytes)
      : bytes_(static_cast<size_t>(std::max<int64_t>(bytes, 1))), data_(new std::byte[bytes_]) {
#ifdef MADV_HUGEPAGE
    ::madvise(data_.get(), bytes_, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  }
  std::byte* data() const { return data_.get(); }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  std::unique_ptr<std::byte[]> data_;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_BUFFER_H_
