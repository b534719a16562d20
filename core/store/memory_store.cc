#include "core/store/memory_store.h"

#include <algorithm>
#include <optional>

#include "core/base/status_macros.h"
#include "core/store/internal/store_util.h"

namespace shardkit {
namespace {

constexpr std::string_view kName = "MemoryStore";

absl::Status ValidateKeys(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(kName, key));
  return absl::OkStatus();
}

}  // namespace

absl::Status MemoryStore::Set(std::string_view key, std::string_view value) {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(kName, key));
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_.insert_or_assign(std::string(key), std::string(value));
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> MemoryStore::Get(std::string_view key, absl::Duration timeout) {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(kName, key));
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::string> missing = WaitLocked(lock, {std::string(key)}, start + timeout);
  if (!missing.empty())
    return internal::KeysMissingError(kName, "Get", missing, absl::Now() - start);
  return values_.find(key)->second;
}

absl::Status MemoryStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  SHARDKIT_RETURN_IF_ERROR(ValidateKeys(keys));
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::string> missing = WaitLocked(lock, keys, start + timeout);
  if (missing.empty()) return absl::OkStatus();
  return internal::KeysMissingError(kName, "Wait", missing, absl::Now() - start);
}

absl::StatusOr<int64_t> MemoryStore::Add(std::string_view key, int64_t delta) {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(kName, key));
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    std::optional<std::string> old;
    if (it != values_.end()) old = it->second;
    SHARDKIT_ASSIGN_OR_RETURN(value, internal::AddToCounter(kName, key, old, delta));
    values_.insert_or_assign(std::string(key), std::to_string(value));
  }
  changed_.notify_all();
  return value;
}

absl::StatusOr<bool> MemoryStore::Check(const std::vector<std::string>& keys) {
  SHARDKIT_RETURN_IF_ERROR(ValidateKeys(keys));
  std::lock_guard<std::mutex> lock(mu_);
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& key) { return values_.contains(key); });
}

std::vector<std::string> MemoryStore::WaitLocked(std::unique_lock<std::mutex>& lock,
                                                 const std::vector<std::string>& keys,
                                                 absl::Time deadline) {
  std::vector<std::string> missing;
  while (true) {
    missing.clear();
    for (const std::string& key : keys) {
      if (!values_.contains(key)) missing.push_back(key);
    }
    absl::Duration remaining = deadline - absl::Now();
    if (missing.empty() || remaining <= absl::ZeroDuration()) return missing;
    // Bounded slices keep an infinite timeout from overflowing std::chrono.
    changed_.wait_for(lock, absl::ToChronoNanoseconds(std::min(remaining, absl::Hours(1))));
  }
}

}  // namespace shardkit
