// The Communicator conformance suite on NCCL: real forked ranks, one CUDA device per rank
// (SHARDKIT_LOCAL_RANK = rank; NCCL 2.28 refuses two ranks on one GPU), buffers in device memory.
// Cases whose world size exceeds the device count skip, so without a GPU every case skips.
#include "backends/nccl/cuda_util.h"
#include "testing/conformance.h"

namespace shardkit::testing {
namespace {

int CudaDevices() {
  static const int count = nccl_backend::CudaDeviceCountInChild();
  return count;
}

std::vector<ConformanceParam> NcclParams() {
  std::vector<ConformanceParam> params = ConformanceParams("nccl", Device::Cuda());
  for (ConformanceParam& p : params) p.device_count = &CudaDevices;
  return params;
}

INSTANTIATE_TEST_SUITE_P(Nccl, CommunicatorConformanceTest, ::testing::ValuesIn(NcclParams()),
                         ConformanceParamName);

}  // namespace
}  // namespace shardkit::testing
