// The MPI backend as a plugin, libshardkit_backend_mpi.so (//backends/mpi:plugin): any shardkit
// program loads it by name (SHARDKIT_BACKEND=mpi) from SHARDKIT_PLUGIN_PATH; host memory only, so
// no allocator crosses.
#include "backends/mpi/mpi_communicator.h"
#include "core/comm/backend_plugin.h"

SHARDKIT_BACKEND_PLUGIN("mpi", &shardkit::mpi_backend::CreateMpiCommunicator);
