// Registers the MPI backend as the built-in backend "mpi". Linked only into MPI programs and
// tests (//backends/mpi:mpi_registered, //integration:shardkit_mpi), never into //backends:all.
#include "backends/mpi/mpi_communicator.h"
#include "core/comm/backend_registry.h"

namespace shardkit::mpi_backend {

SHARDKIT_REGISTER_BACKEND("mpi", &CreateMpiCommunicator);

}  // namespace shardkit::mpi_backend
