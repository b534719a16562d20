// Device: where a tensor's bytes live. `cpu`, `cuda` (the rank's current CUDA device) or `cuda:N`.
//
//   absl::StatusOr<Device> d = Device::Parse("cuda:1");
//   d->ToString();  // "cuda:1"
#ifndef SHARDKIT_CORE_TENSOR_DEVICE_H_
#define SHARDKIT_CORE_TENSOR_DEVICE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace shardkit {

enum class DeviceType { kCpu, kCuda };

inline constexpr int kNumDeviceTypes = 2;

class Device {
 public:
  // The CPU.
  constexpr Device() = default;

  static constexpr Device Cpu() { return Device(); }
  // index -1 means "the current CUDA device" (written "cuda").
  static constexpr Device Cuda(int index = -1) { return Device(DeviceType::kCuda, index); }

  // Accepts exactly "cpu", "cuda" and "cuda:N" (N ASCII digits, no leading zeros, < 2^31).
  // Errors: kInvalidArgument naming the string.
  [[nodiscard]] static absl::StatusOr<Device> Parse(std::string_view text);

  DeviceType type() const { return type_; }
  // -1 for cpu and for "cuda" without an index.
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::kCpu; }
  bool is_cuda() const { return type_ == DeviceType::kCuda; }

  std::string ToString() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }

 private:
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  DeviceType type_ = DeviceType::kCpu;
  int index_ = -1;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_DEVICE_H_
