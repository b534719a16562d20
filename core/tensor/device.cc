#include "core/tensor/device.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace shardkit {
namespace {

// ASCII digits, no leading zero (except "0" itself), value < 2^31.
bool ParseIndex(std::string_view digits, int* out) {
  if (digits.empty() || digits.size() > 10) return false;
  if (digits.size() > 1 && digits[0] == '0') return false;
  long long value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value > 0x7fffffffLL) return false;
  *out = static_cast<int>(value);
  return true;
}

}  // namespace

absl::StatusOr<Device> Device::Parse(std::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda();
  constexpr std::string_view kCudaPrefix = "cuda:";
  int index = 0;
  if (text.substr(0, kCudaPrefix.size()) == kCudaPrefix &&
      ParseIndex(text.substr(kCudaPrefix.size()), &index)) {
    return Device::Cuda(index);
  }
  return absl::InvalidArgumentError(absl::StrCat("invalid device \"",
                                                 absl::string_view(text.data(), text.size()),
                                                 "\"; expected \"cpu\", \"cuda\" or \"cuda:N\""));
}

std::string Device::ToString() const {
  if (type_ == DeviceType::kCpu) return "cpu";
  if (index_ < 0) return "cuda";
  return absl::StrCat("cuda:", index_);
}

}  // namespace shardkit
