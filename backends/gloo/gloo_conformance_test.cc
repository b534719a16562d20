// The Communicator conformance suite on Gloo: real forked ranks over TCP on 127.0.0.1.
#include "testing/conformance.h"

namespace shardkit::testing {

INSTANTIATE_TEST_SUITE_P(Gloo, CommunicatorConformanceTest,
                         ::testing::ValuesIn(ConformanceParams("gloo")), ConformanceParamName);

}  // namespace shardkit::testing
