// libshardkit_backend_testgloo.so of "other sources": the testgloo plugin (Gloo) reporting another
// build id, for the tests of build-id checks (at load time, and between ranks).
#include "backends/gloo/gloo_communicator.h"
#include "core/comm/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const ShardkitBackendPlugin*
ShardkitGetBackendPlugin() {
  static auto* definition = new shardkit::internal::BackendPluginDefinition(
      "testgloo", &shardkit::gloo_backend::CreateGlooCommunicator, {}, "0ther0build0000f");
  return definition->get();
}
