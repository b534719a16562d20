#include "backends/nccl/cuda_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace shardkit::nccl_backend {

absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(std::string(what), ": ", cudaGetErrorString(error), " (",
                   cudaGetErrorName(error), ", ", static_cast<int>(error), ")");
  switch (error) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
      return absl::FailedPreconditionError("no CUDA device: " + message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  absl::Status status = CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (!status.ok()) return status;
  if (count < 1) return absl::FailedPreconditionError("no CUDA device: cudaGetDeviceCount is 0");
  return count;
}

int CudaDeviceCountInChild() {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    absl::StatusOr<int> count = CudaDeviceCount();
    const int value = count.ok() ? *count : 0;
    _exit(write(fds[1], &value, sizeof(value)) == sizeof(value) ? 0 : 1);
  }
  close(fds[1]);
  int value = 0;
  if (pid < 0 || read(fds[0], &value, sizeof(value)) != sizeof(value)) value = 0;
  close(fds[0]);
  if (pid > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  return value;
}

absl::StatusOr<int> DeviceIndex(const Device& device) {
  if (device.index() >= 0) return device.index();
  int current = 0;
  absl::Status status = CudaStatus(cudaGetDevice(&current), "cudaGetDevice");
  if (!status.ok()) return status;
  return current;
}

absl::StatusOr<ScopedDevice> ScopedDevice::Enter(int index) {
  int previous = 0;
  absl::Status status = CudaStatus(cudaGetDevice(&previous), "cudaGetDevice");
  if (!status.ok()) return status;
  if (previous == index) return ScopedDevice(-1);
  status = CudaStatus(cudaSetDevice(index), absl::StrCat("cudaSetDevice(", index, ")"));
  if (!status.ok()) return status;
  return ScopedDevice(previous);
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace shardkit::nccl_backend
