// The host program's CPU blocks (allocator.h: FindCpuBlock, AddCpuBlockUnmapObserver) as code in a
// backend plugin sees them.
//
// A plugin carries its own copy of core (backend_plugin.h), whose allocator never maps the host's
// tensors: asked about a host tensor it would find nothing. So the loader hands every plugin the
// host's functions, as a ShardkitHostMemory table (the plugin struct's bind_host_memory field),
// and plugin code asks through FindHostCpuBlock / AddHostCpuBlockUnmapObserver. In the host, and
// in a backend linked into the program, those are this image's own allocator until bound.
#ifndef SHARDKIT_CORE_TENSOR_HOST_MEMORY_H_
#define SHARDKIT_CORE_TENSOR_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/tensor/allocator.h"

extern "C" {

// Fields may be appended; a reader uses one only when struct_size covers it.
struct ShardkitHostMemory {
  uint32_t struct_size;  // sizeof(ShardkitHostMemory) as the host was compiled
  // FindCpuBlock: 1 and *base, *bytes set when [ptr, ptr + nbytes) lies in a mapped block, else 0.
  int (*find_cpu_block)(const void* ptr, size_t nbytes, void** base, size_t* bytes);
  // AddCpuBlockUnmapObserver: 1 when added, 0 when the host's slots are full.
  int (*add_cpu_block_unmap_observer)(void (*observer)(void* base, size_t bytes));
};

}  // extern "C"

namespace shardkit {

// This image's own allocator as a table: what the loader hands to plugins. Lives forever.
const ShardkitHostMemory* OwnHostMemory();

// Makes `host` (which must live forever) the table the functions below use; null goes back to
// this image's own allocator. Called by the loader through the plugin struct.
void BindHostMemory(const ShardkitHostMemory* host);

// FindCpuBlock and AddCpuBlockUnmapObserver of the host program's allocator.
std::optional<CpuBlock> FindHostCpuBlock(const void* ptr, size_t nbytes);
bool AddHostCpuBlockUnmapObserver(CpuBlockUnmapObserver observer);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_HOST_MEMORY_H_
