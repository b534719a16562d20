// Helpers shared by the engine test suite's files (engine_test_suite_*.cc): tensors on the case's
// device, byte-exact comparison, and the check that a ShardedTensor holds the source's regions.
#ifndef SHARDKIT_CORE_ENGINE_ENGINE_TEST_SUITE_UTIL_H_
#define SHARDKIT_CORE_ENGINE_ENGINE_TEST_SUITE_UTIL_H_

#include <cstdint>
#include <string>

#include "core/engine/sharded_tensor.h"
#include "core/tensor/tensor.h"
#include "nlohmann/json.hpp"

namespace shardkit::testing {

using Json = nlohmann::json;

constexpr int64_t kBig = (int64_t{1} << 53) + 1;  // int64 values a float64 would round

// The case's device on `rank` (of the parent group): the CPU, or that rank's own CUDA device.
Device RankDevice(const Json& c, int rank);

// `t` copied to `device` (itself when it is there already or is meta).
Tensor OnDevice(const Tensor& t, const Device& device);

// A placement device suffix for list placements: "/cpu" or "/cuda:R".
std::string DeviceSuffix(const Json& c, int rank);

// Compared on the host, whatever device either side is on.
bool SameBytes(const Tensor& a, const Tensor& b);

// Every local shard equals the source's region; the global metadata lists every shard.
void ExpectShardsOf(const ShardedTensor& st, const Tensor& expected, int rank);

}  // namespace shardkit::testing

#endif  // SHARDKIT_CORE_ENGINE_ENGINE_TEST_SUITE_UTIL_H_
