// The UCX backend as a plugin, libshardkit_backend_ucx.so (//backends/ucx:plugin): any shardkit
// program loads it by name (--backend ucx, SHARDKIT_BACKEND=ucx) from SHARDKIT_PLUGIN_PATH; host
// memory only, so no allocator crosses. `shardkit --version` prints the transports it finds.
#include "backends/ucx/internal/ucx_context.h"
#include "backends/ucx/ucx_communicator.h"
#include "core/comm/backend_plugin.h"

SHARDKIT_BACKEND_PLUGIN_DESCRIBED("ucx", &shardkit::ucx_backend::CreateUcxCommunicator,
                                  &shardkit::ucx_backend::DescribeUcx);
