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
//   3. struct_size covers the fields of that version (kBackendPluginV1Size): fields appended later
//      (describe, bind_host_memory) are read only when struct_size covers them, so plugins built
//      before them load;
//   4. build_id == the host's BuildId() (build_id.h): the C++ types below (Communicator,
//      Allocator, absl::StatusOr) are only shared safely between objects built from the same
//      sources, which the build id — a hash of this header and the source revision — stands for;
//   5. name == the <name> of the file.
// Only then are the factory and the allocators used. Changing the meaning of a field, or any field
// but appending one at the end, bumps SHARDKIT_BACKEND_PLUGIN_ABI_VERSION; the prefix
// (struct_size, abi_version) never changes, so every host can report any plugin's version.
//
// Turning a backend factory into a plugin (one .cc file in the plugin's cc_binary):
//
//   #include "core/comm/backend_plugin.h"
//   SHARDKIT_BACKEND_PLUGIN("mpi", &CreateMpiCommunicator);
//   // A plugin that serves device memory also hands over its allocators:
//   SHARDKIT_BACKEND_PLUGIN("nccl", &CreateNcclCommunicator,
//                           ShardkitPluginAllocator{DeviceType::kCuda, &CudaAllocatorInstance});
//   // A plugin that can say what it finds on this host (`shardkit --version` prints it):
//   SHARDKIT_BACKEND_PLUGIN_DESCRIBED("ucx", &CreateUcxCommunicator, &DescribeUcx);
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
#include "core/tensor/host_memory.h"

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
  // Appended to version 1 (present when struct_size covers it; may be null): what the backend
  // finds on this host, for `shardkit --version` ("transports: self, tcp, posix"). Writes one
  // NUL-terminated line of at most `capacity` bytes into `text`; returns 0 when the backend can be
  // used here, nonzero when it cannot (the line then says why).
  int (*describe)(char* text, size_t capacity);
  // Appended to version 1 (present when struct_size covers it; may be null): called by the host
  // once, after the checks, with the host allocator's functions (core/tensor/host_memory.h), which
  // the plugin's own copy of core then uses to find the blocks of the host's tensors (a transport
  // that registers memory once per block). The table lives as long as the process.
  void (*bind_host_memory)(const ShardkitHostMemory* host);
};

// The size of the version-1 fields, without those appended since: the smallest struct the host
// accepts.
#define SHARDKIT_BACKEND_PLUGIN_V1_SIZE offsetof(ShardkitBackendPlugin, describe)

typedef int (*ShardkitDescribeBackendFn)(char* text, size_t capacity);

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
                          const char* build_id = BuildId(),
                          ShardkitDescribeBackendFn describe = nullptr)
      : allocators_(std::move(allocators)) {
    plugin_.struct_size = sizeof(ShardkitBackendPlugin);
    plugin_.abi_version = SHARDKIT_BACKEND_PLUGIN_ABI_VERSION;
    plugin_.name = name;
    plugin_.build_id = build_id;
    plugin_.create_communicator = factory;
    plugin_.allocators = allocators_.data();
    plugin_.num_allocators = allocators_.size();
    plugin_.describe = describe;
    plugin_.bind_host_memory = &BindHostMemory;
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
#define SHARDKIT_BACKEND_PLUGIN(name, factory, ...) \
  SHARDKIT_INTERNAL_BACKEND_PLUGIN(name, factory, nullptr, __VA_ARGS__)

// SHARDKIT_BACKEND_PLUGIN with a `describe` function (the struct's field of that name).
#define SHARDKIT_BACKEND_PLUGIN_DESCRIBED(name, factory, describe, ...) \
  SHARDKIT_INTERNAL_BACKEND_PLUGIN(name, factory, describe, __VA_ARGS__)

#define SHARDKIT_INTERNAL_BACKEND_PLUGIN(name, factory, describe, ...)           \
  extern "C" __attribute__((visibility("default"))) const ShardkitBackendPlugin* \
  ShardkitGetBackendPlugin() {                                                   \
    static ::shardkit::internal::BackendPluginDefinition* definition =           \
        new ::shardkit::internal::BackendPluginDefinition(                       \
            name, factory, std::vector<ShardkitPluginAllocator>{__VA_ARGS__},    \
            ::shardkit::BuildId(), describe);                                    \
    return definition->get();                                                    \
  }                                                                              \
  static_assert(sizeof(name) > 1, "SHARDKIT_BACKEND_PLUGIN needs a backend name")

#endif  // SHARDKIT_CORE_COMM_BACKEND_PLUGIN_H_
