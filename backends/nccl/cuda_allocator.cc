// The CUDA allocator for `cuda`/`cuda:N` tensors, registered for DeviceType::kCuda when this
// library is linked (into the NCCL plugin, or into a test directly). cudaMalloc/cudaFree on the
// tensor's device; copies go through cudaMemcpy with cudaMemcpyDefault (unified addressing picks
// the direction: host⇄device and device⇄device, also across devices). Registration itself makes no
// CUDA call, so merely linking this never initialises CUDA; the first allocation does.
#include "backends/nccl/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "backends/nccl/cuda_util.h"
#include "core/base/status_macros.h"
#include "core/tensor/allocator.h"

namespace shardkit::nccl_backend {
namespace {

class CudaAllocator final : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(const Device& device, size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    SHARDKIT_ASSIGN_OR_RETURN(int index, DeviceIndex(device));
    SHARDKIT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(index));
    void* ptr = nullptr;
    SHARDKIT_RETURN_IF_ERROR(CudaStatus(
        cudaMalloc(&ptr, nbytes), absl::StrCat("cudaMalloc(", nbytes, " bytes) on cuda:", index)));
    return ptr;
  }

  void Deallocate(const Device& device, void* ptr, size_t) override {
    if (ptr == nullptr) return;
    absl::StatusOr<int> index = DeviceIndex(device);
    if (!index.ok()) return;
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(*index);
    (void)cudaFree(ptr);  // cannot fail usefully here: a dead context frees everything anyway
  }

  absl::Status Copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
                    size_t nbytes) override {
    if (nbytes == 0) return absl::OkStatus();
    SHARDKIT_ASSIGN_OR_RETURN(int index,
                              DeviceIndex(dst_device.is_cuda() ? dst_device : src_device));
    SHARDKIT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(index));
    return CudaStatus(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault),
                      absl::StrCat("cudaMemcpy(", nbytes, " bytes, ", src_device.ToString(), " -> ",
                                   dst_device.ToString(), ")"));
  }

  absl::Status Zero(const Device& device, void* ptr, size_t nbytes) override {
    if (nbytes == 0) return absl::OkStatus();
    SHARDKIT_ASSIGN_OR_RETURN(int index, DeviceIndex(device));
    SHARDKIT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(index));
    return CudaStatus(cudaMemset(ptr, 0, nbytes),
                      absl::StrCat("cudaMemset(", nbytes, " bytes) on cuda:", index));
  }
};

[[maybe_unused]] const bool registered =
    (RegisterAllocator(DeviceType::kCuda, CudaAllocatorInstance()), true);

}  // namespace

Allocator* CudaAllocatorInstance() {
  static CudaAllocator* allocator = new CudaAllocator();
  return allocator;
}

}  // namespace shardkit::nccl_backend
