// CUDA runtime helpers for the NCCL backend and the CUDA allocator (internal to backends/nccl):
// every CUDA result becomes an absl::Status here, once, and "no usable driver or device" is one
// clear kFailedPrecondition ("no CUDA device") instead of a crash.
//
//   SHARDKIT_ASSIGN_OR_RETURN(int count, CudaDeviceCount());
//   SHARDKIT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(1));
//   SHARDKIT_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p, n), "cudaMalloc"));
#ifndef SHARDKIT_BACKENDS_NCCL_CUDA_UTIL_H_
#define SHARDKIT_BACKENDS_NCCL_CUDA_UTIL_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/device.h"

namespace shardkit::nccl_backend {

// OK for cudaSuccess, else "<what>: <description> (<name>, <number>)" with a code chosen by what
// the caller can do: kFailedPrecondition ("no CUDA device") when the driver is missing or too old
// or there is no device, kResourceExhausted when out of memory, kInvalidArgument for a bad device
// ordinal, kInternal otherwise.
[[nodiscard]] absl::Status CudaStatus(cudaError_t error, std::string_view what);

// The number of CUDA devices this process can use (>= 1).
// Errors: kFailedPrecondition "no CUDA device: …" when there is none or no usable driver.
[[nodiscard]] absl::StatusOr<int> CudaDeviceCount();

// CudaDeviceCount() measured in a forked child, so that the calling process never initialises
// CUDA (a process that forks rank processes must not: CUDA state does not survive fork). Returns 0
// when there is no device or no driver. For tests and launchers deciding what can run.
int CudaDeviceCountInChild();

// The device index `device` means: its index, or the current device for plain "cuda".
[[nodiscard]] absl::StatusOr<int> DeviceIndex(const Device& device);

// Makes a device current for the lifetime of the object and restores the previous one after.
// Move-only.
class ScopedDevice {
 public:
  // Errors: CudaStatus of cudaGetDevice / cudaSetDevice.
  [[nodiscard]] static absl::StatusOr<ScopedDevice> Enter(int index);
  ScopedDevice(ScopedDevice&& other) noexcept : previous_(other.previous_) { other.previous_ = -1; }
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ~ScopedDevice();

 private:
  explicit ScopedDevice(int previous) : previous_(previous) {}
  int previous_;  // -1: nothing to restore
};

}  // namespace shardkit::nccl_backend

#endif  // SHARDKIT_BACKENDS_NCCL_CUDA_UTIL_H_
