// The buffers a streaming path allocates once and reuses for every round, so that only what a
// round uses is ever touched (first touch of fresh memory is the dominant cost on these machines:
// docs/performance.md). They come from the tensor allocator (core/tensor/allocator.h): large
// blocks huge-page aligned, freed blocks kept for reuse.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_BUFFER_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_BUFFER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/status_macros.h"
#include "core/tensor/allocator.h"

namespace shardkit::checkpoint {

// `count` CPU buffers of `bytes` each (at least 1 byte). Errors: kResourceExhausted as the
// allocator's.
[[nodiscard]] inline absl::StatusOr<std::vector<std::shared_ptr<Storage>>> AllocateBuffers(
    size_t count, int64_t bytes) {
  std::vector<std::shared_ptr<Storage>> buffers;
  for (size_t i = 0; i < count; ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(
        buffers.emplace_back(),
        Storage::Allocate(Device::Cpu(), static_cast<size_t>(std::max<int64_t>(bytes, 1))));
  }
  return buffers;
}

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_STREAM_BUFFER_H_
