// The backend plugin ABI: what a shared object `libshardkit_backend_<name>.so` exports so that any
// shardkit program can load the backend `<name>` at run time (backend_loader.h does the loading;
// README "Backends and plugins" is the author's how-to).
//
// A plugin exports one C symbol, ShardkitGetBackendPlugin, returning a static, versioned
// ShardkitBackendPlugin. A plugin built as a `linkshared` cc_binary carries its own copy of every
// static in core (backend registry, allocator table): registrations made inside it are invisible
// to the host, so everything the host needs crosses through the struct. The host reads the fields
// in this order and stops at the first mismatch:
//   1. struct_size covers the fixed prefix (struct_size, abi_version);
//   2. abi_version == SHARDKIT_BACKEND_PLUGIN_ABI_VERSION;
//   3. struct_size >= sizeof(ShardkitBackendPlugin) of that version;
//   4. build_id == the host's BuildId() (build_id.h): the C++ types below (Communicator,
//      Allocator, absl::StatusOr) are only shared safely between objects built from the same
//      sources, which the build id — a hash of this header and the source revision — stands for;
//   5. name == the <name> of the file.
// Only then are the factory and the allocators used. Changing this struct (or the meaning of a
// field) bumps SHARDKIT_BACKEND_PLUGIN_ABI_VERSION; the prefix (struct_size, abi_version) never
// changes, so every host can report any plugin's version.
//
// Turning a backend factory into a plugin (one .cc file in the plugin's cc_binary):
//
//   #include "core/comm/backend_plugin.h"
//   SHARDKIT_BACKEND_PLUGIN("mpi", &CreateMpiCommunicator);
//   // A plugin that serves device memory also hands over its allocators:
//   SHARDKIT_BACKEND_PLUGIN("nccl", &CreateNcclCommunicator,
//                           ShardkitPluginAllocator{DeviceType::kCuda, &CudaAllocatorInstance});
//
// and in BUILD: shardkit_backend_plugin(name = "plugin", backend = "mpi", deps = [...])
// (tools/build_defs.bzl): a cc_binary `libshardkit_backend_mpi.so` that exports only this symbol.
#ifndef SHARDKIT_CORE_COMM_BACKEND_PLUGIN_H_
#define SHARDKIT_CORE_COMM_BACKEND_PLUGIN_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/comm/backend_registry.h"
#include "core/comm/build_id.h"
#include "core/tensor/allocator.h"
#include "core/tensor/device.h"

// Version 1: the fields below.
#define SHARDKIT_BACKEND_PLUGIN_ABI_VERSION 1

extern "C" {

// An allocator the host registers (RegisterAllocator) for `device_type` once the plugin is loaded.
// `get` is called by the host after the checks; the allocator must live as long as the process.
struct ShardkitPluginAllocator {
  shardkit::DeviceType device_type;
  shardkit::Allocator* (*get)();
};

struct ShardkitBackendPlugin {
  // The fixed prefix, the same in every ABI version.
  uint32_t struct_size;  // sizeof(ShardkitBackendPlugin) as the plugin was compiled
  uint32_t abi_version;  // SHARDKIT_BACKEND_PLUGIN_ABI_VERSION as the plugin was compiled
  // Version 1.
  const char* name;      // the backend's name, "nccl": the <name> of the file
  const char* build_id;  // BuildId() of the sources the plugin was built from
  // Creates one rank's communicator (the backend_registry.h contract: options are complete).
  shardkit::BackendFactory create_communicator;
  // Allocators for the devices the backend serves (none for host-memory backends).
  const ShardkitPluginAllocator* allocators;
  size_t num_allocators;
};

// The plugin's entry point: a pointer to a static struct, valid until the process ends.
typedef const ShardkitBackendPlugin* (*ShardkitGetBackendPluginFn)();

}  // extern "C"

namespace shardkit {

// The symbol every plugin exports.
inline constexpr char kBackendPluginSymbol[] = "ShardkitGetBackendPlugin";

namespace internal {
// The struct SHARDKIT_BACKEND_PLUGIN returns, built once.
class BackendPluginDefinition {
 public:
  // `build_id`: BuildId(); tests pass another to stand for a plugin of other sources.
  BackendPluginDefinition(const char* name, BackendFactory factory,
                          std::vector<ShardkitPluginAllocator> allocators,
                          const char* build_id = BuildId())
      : allocators_(std::move(allocators)) {
    plugin_.struct_size = sizeof(ShardkitBackendPlugin);
    plugin_.abi_version = SHARDKIT_BACKEND_PLUGIN_ABI_VERSION;
    plugin_.name = name;
    plugin_.build_id = build_id;
    plugin_.create_communicator = factory;
    plugin_.allocators = allocators_.data();
    plugin_.num_allocators = allocators_.size();
  }
  ShardkitBackendPlugin* get() { return &plugin_; }

 private:
  std::vector<ShardkitPluginAllocator> allocators_;
  ShardkitBackendPlugin plugin_{};
};
}  // namespace internal
}  // namespace shardkit

// Defines ShardkitGetBackendPlugin for the backend `name` (a string literal) created by `factory`
// (a BackendFactory); the optional further arguments are ShardkitPluginAllocator values. Use it
// once, at global scope, in a file of the plugin's cc_binary.
#define SHARDKIT_BACKEND_PLUGIN(name, factory, ...)                              \
  extern "C" __attribute__((visibility("default"))) const ShardkitBackendPlugin* \
  ShardkitGetBackendPlugin() {                                                   \
    static ::shardkit::internal::BackendPluginDefinition* definition =           \
        new ::shardkit::internal::BackendPluginDefinition(                       \
            name, factory, std::vector<ShardkitPluginAllocator>{__VA_ARGS__});   \
    return definition->get();                                                    \
  }                                                                              \
  static_assert(sizeof(name) > 1, "SHARDKIT_BACKEND_PLUGIN needs a backend name")

#endif  // SHARDKIT_CORE_COMM_BACKEND_PLUGIN_H_
