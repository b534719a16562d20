// The CUDA allocator for `cuda`/`cuda:N` tensors (internal to backends/nccl). Linked into a
// program, it registers itself for DeviceType::kCuda; the NCCL plugin hands the same instance to
// the host through its plugin struct (nccl_plugin.cc), since the plugin's registration is
// invisible to the host.
#ifndef SHARDKIT_BACKENDS_NCCL_CUDA_ALLOCATOR_H_
#define SHARDKIT_BACKENDS_NCCL_CUDA_ALLOCATOR_H_

#include "core/tensor/allocator.h"

namespace shardkit::nccl_backend {

// The process-wide CUDA allocator (lives until the process ends). Makes no CUDA call.
Allocator* CudaAllocatorInstance();

}  // namespace shardkit::nccl_backend

#endif  // SHARDKIT_BACKENDS_NCCL_CUDA_ALLOCATOR_H_
