// Helpers shared by the rank sides of `shardkit bench` (shard_bench.cc, sync_bench.cc).
#ifndef SHARDKIT_INTEGRATION_BENCH_BENCH_UTIL_H_
#define SHARDKIT_INTEGRATION_BENCH_BENCH_UTIL_H_

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/allocator.h"

namespace shardkit::bench {

// A field of /proc/self/status ("VmRSS", "VmHWM") in MiB; 0 where unavailable.
double StatusFieldMiB(std::string_view field);

// The median of `values` (not empty).
double Median(std::vector<double> values);

// Writes every byte of [ptr, ptr + bytes) on `device` once (the CPU's first touch is what is
// slow on these machines, so no timed round pays it).
[[nodiscard]] absl::Status Touch(const Device& device, std::byte* ptr, size_t bytes);

// `bytes` of touched memory on `device`.
[[nodiscard]] absl::StatusOr<std::shared_ptr<Storage>> TouchedStorage(const Device& device,
                                                                      size_t bytes);

}  // namespace shardkit::bench

#endif  // SHARDKIT_INTEGRATION_BENCH_BENCH_UTIL_H_
