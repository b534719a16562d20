// Argument checks and self copies shared by the collectives' bodies (collectives.cc) and the
// segment calls (segments.cc). Internal to //core/comm.
#ifndef SHARDKIT_CORE_COMM_INTERNAL_SEGMENT_HELPERS_H_
#define SHARDKIT_CORE_COMM_INTERNAL_SEGMENT_HELPERS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "core/comm/internal/call_agreement.h"

namespace shardkit::internal {

// Keeps the first problem found.
void Note(LocalProblem& problem, LocalProblem candidate);
LocalProblem CheckRoot(int root, int world_size);
// A per-rank list's length against the group's.
LocalProblem CheckCount(size_t count, int world_size);
// What a rank sends itself against what it receives from itself.
LocalProblem CheckSelfSize(size_t sent, size_t received);

// A rank's copy to itself (its own chunk of a Scatter/Gather/AllToAll/AllGather), on whatever
// devices the two buffers live.
absl::Status CopyToSelf(ConstBuffer from, void* to, const Device& to_device, size_t size);
// A rank's own segments: `from` copied in order into `to` (same total size, possibly cut
// differently).
absl::Status CopySegmentsToSelf(std::span<const ConstBuffer> from,
                                std::span<const MutableBuffer> to);

std::vector<uint64_t> SegmentSizes(std::span<const ConstBuffer> segments);
uint64_t TotalSize(std::span<const uint64_t> sizes);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_COMM_INTERNAL_SEGMENT_HELPERS_H_
