// The Communicator conformance suite: every registered backend must pass it. It sweeps world
// sizes 1/2/3/4/7, byte counts 0/1/n−1/large-and-non-divisible and roots (first and last rank)
// over every operation, checks data, per-op byte counters and that ranks which disagree (sizes,
// ops) all get the same kInvalidArgument without losing the communicator. Cases of one world size
// share one forked RankGroup.
//
// Instantiate it in the backend's test (link :conformance, which is alwayslink):
//
//   INSTANTIATE_TEST_SUITE_P(Gloo, CommunicatorConformanceTest,
//                            ::testing::ValuesIn(ConformanceParams("gloo")), ConformanceParamName);
//
// A device backend passes the device and a device counter (backends/nccl/nccl_conformance_test.cc).
//
// Externally launched ranks (mpirun, srun, `shardkit launch`): every process of the job runs the
// test binary and is one rank. ExternalConformanceParams marks the sweep so: each process connects
// once, from its environment (ConnectOptionsFromEnv with the backend's name), runs every case of
// its job's world size on that communicator, and skips the cases of other sizes. Each rank
// reports its own gtest result; the launcher's exit status is the job's. Select one size with
// `--gtest_filter='*/w3_*'` to leave nothing skipped (backends/mpi/mpi_conformance_test.sh):
//
//   INSTANTIATE_TEST_SUITE_P(Mpi, CommunicatorConformanceTest,
//                            ::testing::ValuesIn(ExternalConformanceParams("mpi")),
//                            ConformanceParamName);
#ifndef SHARDKIT_TESTING_CONFORMANCE_H_
#define SHARDKIT_TESTING_CONFORMANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor/device.h"
#include "gtest/gtest.h"

namespace shardkit::testing {

struct ConformanceParam {
  std::string backend;
  int world_size = 1;
  int64_t bytes = 0;  // base payload size; per-rank sizes are derived from it (some are 0)
  int root = 0;
  // Where the cases' buffers live (NCCL: Device::Cuda(), each rank's current device).
  Device device = Device::Cpu();
  // For device backends: how many devices this machine has (one per rank); cases with more ranks
  // skip. Called lazily in the test process; must not initialise CUDA there (probe in a child).
  int (*device_count)() = nullptr;
  // Ranks started outside the test (see the file comment) instead of forked by it.
  bool external = false;
};

// The sweep for `backend`, with buffers on `device`.
std::vector<ConformanceParam> ConformanceParams(const std::string& backend,
                                                const Device& device = Device::Cpu());

// The same sweep for externally launched ranks (see the file comment).
std::vector<ConformanceParam> ExternalConformanceParams(const std::string& backend);

// "w4_b100003_root3"
std::string ConformanceParamName(const ::testing::TestParamInfo<ConformanceParam>& info);

class CommunicatorConformanceTest : public ::testing::TestWithParam<ConformanceParam> {};

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_CONFORMANCE_H_
