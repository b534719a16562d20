// libshardkit_backend_oldabi.so: a plugin built before the describe field was appended to the
// ABI's struct (its struct_size covers the version-1 fields only), for the test that the host
// still loads it and reads no describe or bind_host_memory function from it.
#include "backends/gloo/gloo_communicator.h"
#include "core/comm/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const ShardkitBackendPlugin*
ShardkitGetBackendPlugin() {
  static ShardkitBackendPlugin* plugin = [] {
    auto* p = new ShardkitBackendPlugin{};
    p->struct_size = SHARDKIT_BACKEND_PLUGIN_V1_SIZE;
    p->abi_version = SHARDKIT_BACKEND_PLUGIN_ABI_VERSION;
    p->name = "oldabi";
    p->build_id = shardkit::BuildId();
    p->create_communicator = &shardkit::gloo_backend::CreateGlooCommunicator;
    // What a newer host must not read: past the struct this plugin says it has.
    p->describe = reinterpret_cast<int (*)(char*, size_t)>(0x1);
    p->bind_host_memory = reinterpret_cast<void (*)(const ShardkitHostMemory*)>(0x1);
    return p;
  }();
  return plugin;
}
