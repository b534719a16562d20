#include "core/allocator.h"

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardkit {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

class CpuAllocator final : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(const Device& device, size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* ptr = nullptr;
    if (nbytes >= kHugePage) {
      // Round up so aligned_alloc's size is a multiple of the alignment.
      size_t rounded = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
      ptr = std::aligned_alloc(kHugePage, rounded);
      if (ptr != nullptr) ::madvise(ptr, rounded, MADV_HUGEPAGE);  // advisory; failure is fine
    } else {
      ptr = std::malloc(nbytes);
    }
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of CPU memory allocating ", nbytes, " bytes"));
    }
    return ptr;
  }

  void Deallocate(const Device&, void* ptr, size_t) override { std::free(ptr); }

  absl::Status Copy(void* dst, const Device&, const void* src, const Device&,
                    size_t nbytes) override {
    if (nbytes > 0) std::memmove(dst, src, nbytes);
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

void RegisterAllocator(DeviceType type, Allocator* allocator) {
  Registry()[static_cast<size_t>(type)].store(allocator);
}

absl::StatusOr<Allocator*> GetAllocator(const Device& device) {
  Allocator* allocator = Registry()[static_cast<size_t>(device.type())].load();
  if (allocator == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no allocator for device ", device.ToString(),
                     ": this build of shardkit has no CUDA support (build with --config=cuda)"));
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
