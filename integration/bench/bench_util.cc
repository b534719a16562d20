#include "integration/bench/bench_util.h"

#include <algorithm>
#include <cstring>

#include "core/base/status_macros.h"
#include "core/os/proc_status.h"

namespace shardkit::bench {

double StatusFieldMiB(std::string_view field) {
  return static_cast<double>(os::ProcStatusBytes(field).value_or(0)) / (1 << 20);
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

absl::Status Touch(const Device& device, std::byte* ptr, size_t bytes) {
  if (device == Device::Cpu()) {
    std::memset(ptr, 0x3c, bytes);
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(Allocator * allocator, GetAllocator(device));
  return allocator->Zero(device, ptr, bytes);
}

absl::StatusOr<std::shared_ptr<Storage>> TouchedStorage(const Device& device, size_t bytes) {
  SHARDKIT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage, Storage::Allocate(device, bytes));
  SHARDKIT_RETURN_IF_ERROR(Touch(device, storage->data(), bytes));
  return storage;
}

}  // namespace shardkit::bench
