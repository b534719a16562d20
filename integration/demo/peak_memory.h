// Peak resident memory of this process, for reports such as `shardkit demo`'s summary.
//
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t peak, PeakRssBytes());
#ifndef SHARDKIT_INTEGRATION_DEMO_PEAK_MEMORY_H_
#define SHARDKIT_INTEGRATION_DEMO_PEAK_MEMORY_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace shardkit::demo {

// VmHWM of /proc/self/status: the highest resident set size this process has had, in bytes.
// Errors: kUnavailable if /proc/self/status cannot be read or has no VmHWM line.
[[nodiscard]] absl::StatusOr<int64_t> PeakRssBytes();

}  // namespace shardkit::demo

#endif  // SHARDKIT_INTEGRATION_DEMO_PEAK_MEMORY_H_
