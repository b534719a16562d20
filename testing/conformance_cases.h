// The pieces the conformance suite's cases share (testing/conformance.cc; the segment calls'
// cases are testing/conformance_segments.cc): what a case receives, the bytes each pair sends, and
// those bytes on the case's device. Internal to the suite.
#ifndef SHARDKIT_TESTING_CONFORMANCE_CASES_H_
#define SHARDKIT_TESTING_CONFORMANCE_CASES_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"
#include "core/tensor/allocator.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"

namespace shardkit::testing::conformance_internal {

// What a case receives (packed into the RankGroup argument).
struct CaseArg {
  int64_t bytes;
  int root;
  Device device;
};

inline CaseArg Decode(std::string_view arg) {
  CaseArg a;
  std::memcpy(&a, arg.data(), sizeof(a));
  return a;
}

// Bytes rank `from` sends to rank `to`: varied, with some zero-byte pairs.
inline size_t Count(int64_t bytes, int from, int to) {
  if (bytes == 0 || (from + to) % 3 == 2) return 0;
  return bytes + from + 2 * to;
}

inline std::vector<uint8_t> Pattern(int from, int to, size_t size) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<uint8_t>(from * 31 + to * 7 + i);
  return v;
}

// A case's bytes on the case's device: for device backends the host bytes are copied to device
// memory before the call and back for the checks.
class Bytes {
 public:
  Bytes(std::vector<uint8_t> host, const Device& device) : host_(std::move(host)), device_(device) {
    if (device.is_cpu()) return;
    absl::StatusOr<std::shared_ptr<Storage>> storage = Storage::Allocate(device, host_.size());
    if (!storage.ok()) {
      ADD_FAILURE() << storage.status();
      return;
    }
    storage_ = *storage;
    SHARDKIT_EXPECT_OK(
        CopyBytes(storage_->data(), device, host_.data(), Device::Cpu(), host_.size()));
  }
  Bytes(size_t size, uint8_t fill, const Device& device)
      : Bytes(std::vector<uint8_t>(size, fill), device) {}

  MutableBuffer buffer() {
    if (device_.is_cpu()) return MutableBuffer(host_);
    return MutableBuffer(storage_ != nullptr ? storage_->data() : nullptr, host_.size(), device_);
  }
  size_t size() const { return host_.size(); }
  // The current contents (copied back from the device).
  const std::vector<uint8_t>& Read() {
    if (storage_ != nullptr) {
      SHARDKIT_EXPECT_OK(
          CopyBytes(host_.data(), Device::Cpu(), storage_->data(), device_, host_.size()));
    }
    return host_;
  }

 private:
  std::vector<uint8_t> host_;
  Device device_;
  std::shared_ptr<Storage> storage_;
};

// The segment calls' cases (conformance_segments.cc).
void ScatterSegmentsCase(int rank, Communicator& comm, std::string_view arg);
void AllToAllSegmentsCase(int rank, Communicator& comm, std::string_view arg);
void GatheredSegmentsCase(int rank, Communicator& comm, std::string_view arg);
void PreparedTransferCase(int rank, Communicator& comm, std::string_view arg);

}  // namespace shardkit::testing::conformance_internal

#endif  // SHARDKIT_TESTING_CONFORMANCE_CASES_H_
