// The NCCL backend as a plugin, libshardkit_backend_nccl.so (//backends/nccl:plugin): its factory
// and the CUDA allocator cross to the host through the plugin struct (core/comm/backend_plugin.h).
#include "backends/nccl/cuda_allocator.h"
#include "backends/nccl/nccl_communicator.h"
#include "core/comm/backend_plugin.h"

SHARDKIT_BACKEND_PLUGIN("nccl", &shardkit::nccl_backend::CreateNcclCommunicator,
                        ShardkitPluginAllocator{shardkit::DeviceType::kCuda,
                                                &shardkit::nccl_backend::CudaAllocatorInstance});
