// libshardkit_backend_needsdep.so: a plugin that needs libshardkit_plugin_test_dep.so at load time
// (DT_NEEDED), so dlopen fails where that library is missing.
#include "backends/gloo/gloo_communicator.h"
#include "core/comm/backend_plugin.h"

extern "C" int ShardkitPluginTestDep();

namespace {
[[maybe_unused]] const int dep = ShardkitPluginTestDep();
}  // namespace

SHARDKIT_BACKEND_PLUGIN("needsdep", &shardkit::gloo_backend::CreateGlooCommunicator);
