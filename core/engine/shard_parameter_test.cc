// The engine test suite (engine_test_suite.h) over real Gloo: forked ranks on 127.0.0.1, CPU
// tensors.
#include "core/engine/engine_test_suite.h"

namespace shardkit::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Gloo, EngineTest, ::testing::ValuesIn(EngineParams("gloo")),
                         EngineParamName);

}  // namespace
}  // namespace shardkit::testing
