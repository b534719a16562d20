// The engine test suite (core/engine/engine_test_suite.h) on NCCL: forked ranks, one CUDA device
// per rank (cuda:rank), tensors and placements in device memory. World sizes above the device
// count skip, so without a GPU every case skips.
#include "backends/nccl/cuda_util.h"
#include "core/engine/engine_test_suite.h"

namespace shardkit::testing {
namespace {

int CudaDevices() {
  static const int count = nccl_backend::CudaDeviceCountInChild();
  return count;
}

INSTANTIATE_TEST_SUITE_P(Nccl, EngineTest,
                         ::testing::ValuesIn(EngineParams("nccl", /*cuda=*/true, &CudaDevices)),
                         EngineParamName);

}  // namespace
}  // namespace shardkit::testing
