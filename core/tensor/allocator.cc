#include "core/tensor/allocator.h"

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/env.h"
#include "core/tensor/host_copy.h"

namespace shardkit {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMinMapped = size_t{1} << 20;  // smaller blocks come from malloc
constexpr size_t kMidGranule = size_t{64} << 10;
constexpr size_t kDefaultCacheMiB = 512;

// The size actually mapped for a block of `nbytes` >= kMinMapped: 2 MiB multiples from 2 MiB on
// (huge pages), 64 KiB multiples below (a 1.3 MiB shard must not occupy a 2 MiB huge page).
size_t MappedSize(size_t nbytes) {
  const size_t granule = nbytes >= kHugePage ? kHugePage : kMidGranule;
  return (nbytes + granule - 1) / granule * granule;
}

// Every block mapped by MapBlock and not yet unmapped (handed out or cached), by start address,
// and the observers told before one is unmapped.
class MappedBlocks {
 public:
  void Add(void* base, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(base)] = bytes;
  }

  std::optional<CpuBlock> Find(const void* ptr, size_t nbytes) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.upper_bound(at);
    if (it == blocks_.begin()) return std::nullopt;
    --it;
    if (at + nbytes > it->first + it->second) return std::nullopt;
    return CpuBlock{reinterpret_cast<void*>(it->first), it->second};
  }

  // Tells the observers, forgets the block, unmaps it.
  void Unmap(void* base, size_t bytes) {
    for (const std::atomic<CpuBlockUnmapObserver>& slot : observers_) {
      if (CpuBlockUnmapObserver observer = slot.load()) observer(base, bytes);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks_.erase(reinterpret_cast<uintptr_t>(base));
    }
    ::munmap(base, bytes);
  }

  bool AddObserver(CpuBlockUnmapObserver observer) {
    for (std::atomic<CpuBlockUnmapObserver>& slot : observers_) {
      CpuBlockUnmapObserver empty = nullptr;
      if (slot.compare_exchange_strong(empty, observer)) return true;
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::map<uintptr_t, size_t> blocks_;
  std::array<std::atomic<CpuBlockUnmapObserver>, 8> observers_{};
};

MappedBlocks& Mapped() {
  static MappedBlocks* mapped = new MappedBlocks();  // never destroyed: tensors may outlive main
  return *mapped;
}

// `bytes` of fresh anonymous memory, or nullptr. From 2 MiB on: at a 2 MiB boundary, advised for
// huge pages. Mapped directly (not aligned_alloc) so that freeing can keep or unmap it.
void* MapFresh(size_t bytes) {
  if (bytes < kHugePage) {
    void* ptr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return ptr == MAP_FAILED ? nullptr : ptr;
  }
  void* raw = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(raw, aligned - start);
  const size_t tail = start + bytes + kHugePage - (aligned + bytes);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* ptr = reinterpret_cast<void*>(aligned);
  ::madvise(ptr, bytes, MADV_HUGEPAGE);  // advisory; failure is fine
  return ptr;
}

void* MapBlock(size_t bytes) {
  void* ptr = MapFresh(bytes);
  if (ptr != nullptr) Mapped().Add(ptr, bytes);
  return ptr;
}

size_t LimitFromEnvironment() {
  const char* text = std::getenv(env::kCpuCacheMib);
  size_t mib = kDefaultCacheMiB;
  if (text != nullptr && *text != '\0' && !absl::SimpleAtoi(text, &mib)) mib = kDefaultCacheMiB;
  return mib << 20;
}

// Freed large blocks, newest last. Few blocks (at most limit / 2 MiB), so lookups scan.
class BlockCache {
 public:
  // A cached block of exactly `bytes`, or nullptr.
  void* Take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = blocks_.size(); i-- > 0;) {
      if (blocks_[i].bytes != bytes) continue;
      void* ptr = blocks_[i].ptr;
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
      cached_bytes_ -= bytes;
      ++hits_;
      return ptr;
    }
    ++misses_;
    return nullptr;
  }

  // Keeps `ptr` (a block of `bytes`) for reuse, unmapping the oldest blocks to make room; unmaps
  // `ptr` itself if it can never fit.
  void Put(void* ptr, size_t bytes) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (bytes > Limit()) {
        evicted.push_back({ptr, bytes});
      } else {
        blocks_.push_back({ptr, bytes});
        cached_bytes_ += bytes;
        EvictBeyond(Limit(), evicted);
      }
    }
    for (const Block& block : evicted) Mapped().Unmap(block.ptr, block.bytes);
  }

  void SetLimit(size_t bytes) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit_ = bytes;
      EvictBeyond(bytes, evicted);
    }
    for (const Block& block : evicted) Mapped().Unmap(block.ptr, block.bytes);
  }

  void Release() {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      EvictBeyond(0, evicted);
      hits_ = misses_ = 0;
    }
    for (const Block& block : evicted) Mapped().Unmap(block.ptr, block.bytes);
  }

  CpuCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, cached_bytes_, blocks_.size(), Limit()};
  }

 private:
  struct Block {
    void* ptr;
    size_t bytes;
  };

  size_t Limit() {  // requires mu_
    if (!limit_.has_value()) limit_ = LimitFromEnvironment();
    return *limit_;
  }

  // Moves the oldest blocks to `evicted` until at most `keep` bytes stay cached. Requires mu_.
  void EvictBeyond(size_t keep, std::vector<Block>& evicted) {
    size_t drop = 0;
    while (cached_bytes_ > keep) {
      evicted.push_back(blocks_[drop]);
      cached_bytes_ -= blocks_[drop++].bytes;
    }
    blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(drop));
  }

  std::mutex mu_;
  std::optional<size_t> limit_;  // read from the environment on first use
  std::vector<Block> blocks_;
  size_t cached_bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0;
};

BlockCache& Cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: tensors may outlive main
  return *cache;
}

class CpuAllocator final : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(const Device& device, size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* ptr = nullptr;
    if (nbytes >= kMinMapped) {
      const size_t mapped = MappedSize(nbytes);
      ptr = Cache().Take(mapped);
      if (ptr == nullptr) ptr = MapBlock(mapped);
    } else {
      ptr = std::malloc(nbytes);
    }
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of CPU memory allocating ", nbytes, " bytes"));
    }
    return ptr;
  }

  void Deallocate(const Device&, void* ptr, size_t nbytes) override {
    if (nbytes >= kMinMapped) {
      Cache().Put(ptr, MappedSize(nbytes));
    } else {
      std::free(ptr);
    }
  }

  absl::Status Copy(void* dst, const Device&, const void* src, const Device&,
                    size_t nbytes) override {
    if (nbytes > 0) CopyHostBytes(dst, src, nbytes);
    return absl::OkStatus();
  }

  absl::Status Zero(const Device&, void* ptr, size_t nbytes) override {
    if (nbytes > 0) std::memset(ptr, 0, nbytes);
    return absl::OkStatus();
  }
};

CpuAllocator cpu_allocator;

std::array<std::atomic<Allocator*>, kNumDeviceTypes>& Registry() {
  static std::array<std::atomic<Allocator*>, kNumDeviceTypes> registry{&cpu_allocator, nullptr};
  return registry;
}

}  // namespace

CpuCacheStats GetCpuCacheStats() { return Cache().Stats(); }

void SetCpuCacheLimit(size_t bytes) { Cache().SetLimit(bytes); }

void ReleaseCpuCache() { Cache().Release(); }

std::optional<CpuBlock> FindCpuBlock(const void* ptr, size_t nbytes) {
  return Mapped().Find(ptr, nbytes);
}

bool AddCpuBlockUnmapObserver(CpuBlockUnmapObserver observer) {
  return Mapped().AddObserver(observer);
}

void RegisterAllocator(DeviceType type, Allocator* allocator) {
  Registry()[static_cast<size_t>(type)].store(allocator);
}

absl::StatusOr<Allocator*> GetAllocator(const Device& device) {
  Allocator* allocator = Registry()[static_cast<size_t>(device.type())].load();
  if (allocator == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no allocator for device ", device.ToString(),
                     ": no backend plugin serving it is loaded (for cuda: connect with the nccl "
                     "backend, whose plugin brings the CUDA allocator)"));
  }
  return allocator;
}

absl::StatusOr<Allocator*> GetCopyAllocator(const Device& dst, const Device& src) {
  return GetAllocator(dst.is_cpu() ? src : dst);
}

absl::Status CopyBytes(void* dst, const Device& dst_device, const void* src,
                       const Device& src_device, size_t nbytes) {
  if (nbytes == 0) return absl::OkStatus();
  absl::StatusOr<Allocator*> allocator = GetCopyAllocator(dst_device, src_device);
  if (!allocator.ok()) return allocator.status();
  return (*allocator)->Copy(dst, dst_device, src, src_device, nbytes);
}

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(const Device& device, size_t nbytes) {
  absl::StatusOr<Allocator*> allocator = GetAllocator(device);
  if (!allocator.ok()) return allocator.status();
  absl::StatusOr<void*> data = (*allocator)->Allocate(device, nbytes);
  if (!data.ok()) return data.status();
  return std::shared_ptr<Storage>(new Storage(*data, nbytes, device, *allocator, nullptr));
}

std::shared_ptr<Storage> Storage::Wrap(void* data, size_t nbytes, const Device& device,
                                       std::function<void()> deleter) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, nullptr, std::move(deleter)));
}

Storage::Storage(void* data, size_t nbytes, const Device& device, Allocator* allocator,
                 std::function<void()> deleter)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      allocator_(allocator),
      deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (allocator_ != nullptr) {
    allocator_->Deallocate(device_, data_, nbytes_);
  } else if (deleter_) {
    deleter_();
  }
}

}  // namespace shardkit
