// The Communicator conformance suite on MPI: one process per rank, started by mpirun (see
// mpi_conformance_test.sh, which runs this binary for every world size 1-4).
#include "testing/conformance.h"

namespace shardkit::testing {

INSTANTIATE_TEST_SUITE_P(Mpi, CommunicatorConformanceTest,
                         ::testing::ValuesIn(ExternalConformanceParams("mpi")),
                         ConformanceParamName);

}  // namespace shardkit::testing
