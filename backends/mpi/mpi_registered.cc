// Registers the MPI backend as the built-in backend "mpi", for the one test program that starts
// MPI itself (mpi_abort_ranks.cc); everything else loads the plugin (mpi_plugin.cc).
#include "backends/mpi/mpi_communicator.h"
#include "core/comm/backend_registry.h"

namespace shardkit::mpi_backend {

SHARDKIT_REGISTER_BACKEND("mpi", &CreateMpiCommunicator);

}  // namespace shardkit::mpi_backend
