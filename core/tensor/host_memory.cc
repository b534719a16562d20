#include "core/tensor/host_memory.h"

#include <atomic>
#include <cstddef>

namespace shardkit {
namespace {

int OwnFind(const void* ptr, size_t nbytes, void** base, size_t* bytes) {
  const std::optional<CpuBlock> block = FindCpuBlock(ptr, nbytes);
  if (!block.has_value()) return 0;
  *base = block->base;
  *bytes = block->bytes;
  return 1;
}

int OwnAddObserver(void (*observer)(void* base, size_t bytes)) {
  return AddCpuBlockUnmapObserver(observer) ? 1 : 0;
}

const ShardkitHostMemory kOwn{sizeof(ShardkitHostMemory), &OwnFind, &OwnAddObserver};

std::atomic<const ShardkitHostMemory*>& Bound() {
  static std::atomic<const ShardkitHostMemory*> bound{&kOwn};
  return bound;
}

// Whether `host` has the field ending at `end` (an offsetof + sizeof).
bool Covers(const ShardkitHostMemory* host, size_t end) { return host->struct_size >= end; }

}  // namespace

const ShardkitHostMemory* OwnHostMemory() { return &kOwn; }

void BindHostMemory(const ShardkitHostMemory* host) {
  Bound().store(host != nullptr ? host : &kOwn);
}

std::optional<CpuBlock> FindHostCpuBlock(const void* ptr, size_t nbytes) {
  const ShardkitHostMemory* host = Bound().load();
  if (!Covers(host, offsetof(ShardkitHostMemory, find_cpu_block) + sizeof(host->find_cpu_block)) ||
      host->find_cpu_block == nullptr) {
    return std::nullopt;
  }
  CpuBlock block;
  if (host->find_cpu_block(ptr, nbytes, &block.base, &block.bytes) == 0) return std::nullopt;
  return block;
}

bool AddHostCpuBlockUnmapObserver(CpuBlockUnmapObserver observer) {
  const ShardkitHostMemory* host = Bound().load();
  if (!Covers(host, offsetof(ShardkitHostMemory, add_cpu_block_unmap_observer) +
                        sizeof(host->add_cpu_block_unmap_observer)) ||
      host->add_cpu_block_unmap_observer == nullptr) {
    return false;
  }
  return host->add_cpu_block_unmap_observer(observer) != 0;
}

}  // namespace shardkit
