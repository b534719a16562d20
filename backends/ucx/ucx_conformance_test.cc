// The Communicator conformance suite on UCX: real forked ranks, UCX choosing its transports
// (shared memory and CMA between these processes of one host).
#include "testing/conformance.h"

namespace shardkit::testing {

INSTANTIATE_TEST_SUITE_P(Ucx, CommunicatorConformanceTest,
                         ::testing::ValuesIn(ConformanceParams("ucx")), ConformanceParamName);

}  // namespace shardkit::testing
