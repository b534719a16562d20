#include "backends/gloo/store_adapter.h"

#include <algorithm>

#include "gloo/common/error.h"

namespace shardkit::gloo_backend {
namespace {

[[noreturn]] void Throw(const absl::Status& status) {
  throw ::gloo::IoException(std::string(status.message()));
}

}  // namespace

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_.Set(Key(key), std::string_view(data.data(), data.size()));
  if (!status.ok()) Throw(status);
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_.Get(Key(key), deadline_ - absl::Now());
  if (!value.ok()) Throw(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void StoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(deadline_ - absl::Now())));
}

void StoreAdapter::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  std::vector<std::string> prefixed;
  for (const std::string& key : keys) prefixed.push_back(Key(key));
  const absl::Duration limit =
      std::min(absl::Milliseconds(timeout.count()), deadline_ - absl::Now());
  absl::Status status = store_.Wait(prefixed, limit);
  if (!status.ok()) Throw(status);
}

}  // namespace shardkit::gloo_backend
