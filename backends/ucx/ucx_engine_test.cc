// The engine test suite (core/engine/engine_test_suite.h) on UCX: forked ranks, every case the
// Gloo suite runs, byte for byte the same results.
#include "core/engine/engine_test_suite.h"

namespace shardkit::testing {

INSTANTIATE_TEST_SUITE_P(Ucx, EngineTest, ::testing::ValuesIn(EngineParams("ucx")),
                         EngineParamName);

}  // namespace shardkit::testing
