// Allocator: device memory for tensor storage, chosen by device type.
//
// The CPU allocator is built in. Large blocks (>= 2 MiB) are mapped 2 MiB-aligned and advised for
// transparent huge pages, which makes first touch several times faster on these machines; blocks
// from 1 MiB on are mapped directly too. Freed mapped blocks are kept in a small cache (CpuCache*
// below) and handed out again for a request of the same rounded size, so repeated shardings reuse
// memory that is already faulted in (docs/performance.md). Other device types (CUDA, from the NCCL
// plugin) register their allocator at load time — from inside the process, or, for a plugin,
// through its plugin struct (core/comm/backend_plugin.h), which the host hands to
// RegisterAllocator:
//
//   static bool registered = (RegisterAllocator(DeviceType::kCuda, &my_cuda_allocator), true);
//
// Thread-safety: registration and lookup are thread-safe; allocators must be thread-safe.
#ifndef SHARDKIT_CORE_TENSOR_ALLOCATOR_H_
#define SHARDKIT_CORE_TENSOR_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/device.h"

namespace shardkit {

class Allocator {
 public:
  virtual ~Allocator() = default;

  // Uninitialised memory for `nbytes` on `device`. nbytes == 0 may return nullptr.
  // Errors: kResourceExhausted when out of memory; device-specific errors otherwise.
  [[nodiscard]] virtual absl::StatusOr<void*> Allocate(const Device& device, size_t nbytes) = 0;
  virtual void Deallocate(const Device& device, void* ptr, size_t nbytes) = 0;

  // Copies `nbytes` between `src` and `dst`; each is on the CPU or on this allocator's device type.
  [[nodiscard]] virtual absl::Status Copy(void* dst, const Device& dst_device, const void* src,
                                          const Device& src_device, size_t nbytes) = 0;

  // Sets `nbytes` at `ptr` on `device` to zero.
  [[nodiscard]] virtual absl::Status Zero(const Device& device, void* ptr, size_t nbytes) = 0;
};

// Registers `allocator` (not owned; must outlive every tensor) for `type`, replacing any earlier.
void RegisterAllocator(DeviceType type, Allocator* allocator);

// Errors: kFailedPrecondition if no allocator is registered for the device's type (for CUDA: the
// NCCL plugin, which registers it when Connect loads it, is not loaded).
[[nodiscard]] absl::StatusOr<Allocator*> GetAllocator(const Device& device);

// The CPU allocator's cache of freed blocks of >= 1 MiB. A block is reused only for a request of
// the same mapped size (rounded up to 2 MiB from 2 MiB on, to 64 KiB below); the oldest blocks are
// unmapped first when the cache is full.
struct CpuCacheStats {
  int64_t hits = 0;    // allocations of >= 1 MiB served from the cache
  int64_t misses = 0;  // allocations of >= 1 MiB that mapped fresh memory
  size_t cached_bytes = 0;
  size_t cached_blocks = 0;
  size_t limit_bytes = 0;
};
CpuCacheStats GetCpuCacheStats();

// Sets how many bytes of freed large blocks the cache may hold (0 disables it), unmapping the
// oldest blocks beyond it. Default: $SHARDKIT_CPU_CACHE_MIB MiB when set, else 512 MiB.
void SetCpuCacheLimit(size_t bytes);

// Unmaps every cached block (the limit is unchanged) and resets the hit/miss counts.
void ReleaseCpuCache();

// A block the CPU allocator mapped (>= 1 MiB): where it starts and how many bytes are mapped.
struct CpuBlock {
  void* base = nullptr;
  size_t bytes = 0;
};

// The mapped block holding all of [ptr, ptr + nbytes), whether handed out or cached; none for
// memory the allocator did not map (small blocks, external memory). A transport that registers
// memory (backends/ucx) registers such a block once and keeps it until the block is unmapped.
std::optional<CpuBlock> FindCpuBlock(const void* ptr, size_t nbytes);

// Calls `observer(base, bytes)` just before the allocator unmaps a block (evicted from the cache,
// or freed while the cache cannot hold it) — never while the block is handed out or cached. At
// most 8 observers per process; returns false when that many are registered already. Observers
// run on the freeing thread and must not allocate or free CPU blocks.
using CpuBlockUnmapObserver = void (*)(void* base, size_t bytes);
bool AddCpuBlockUnmapObserver(CpuBlockUnmapObserver observer);

// The allocator that copies between `dst` and `src`: the non-CPU side's (the CPU's if both are).
// Errors: as GetAllocator.
[[nodiscard]] absl::StatusOr<Allocator*> GetCopyAllocator(const Device& dst, const Device& src);

// Copies `nbytes` from `src` on `src_device` to `dst` on `dst_device` (overlap allowed on one
// device) with GetCopyAllocator's allocator. Errors: as GetAllocator and Allocator::Copy.
[[nodiscard]] absl::Status CopyBytes(void* dst, const Device& dst_device, const void* src,
                                     const Device& src_device, size_t nbytes);

// A block of device memory shared by tensors (views share one Storage). Frees itself when the last
// reference goes away; external memory (DLPack, mmap) is released by its deleter instead.
class Storage {
 public:
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<Storage>> Allocate(const Device& device,
                                                                         size_t nbytes);
  static std::shared_ptr<Storage> Wrap(void* data, size_t nbytes, const Device& device,
                                       std::function<void()> deleter);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  std::byte* data() const { return static_cast<std::byte*>(data_); }
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }

 private:
  Storage(void* data, size_t nbytes, const Device& device, Allocator* allocator,
          std::function<void()> deleter);

  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* allocator_;           // set for allocated storage
  std::function<void()> deleter_;  // set for wrapped storage
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_ALLOCATOR_H_
