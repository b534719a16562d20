#include "core/store/polling_store.h"

#include "core/base/status_macros.h"
#include "core/store/internal/store_util.h"

namespace shardkit::internal {

absl::StatusOr<std::string> PollingStore::Get(std::string_view key, absl::Duration timeout) {
  SHARDKIT_RETURN_IF_ERROR(ValidateKey(name_, key));
  const absl::Time start = absl::Now();
  Backoff backoff(start + timeout);
  while (true) {
    SHARDKIT_ASSIGN_OR_RETURN(std::optional<std::string> value, TryGet(key, start + timeout));
    if (value.has_value()) return *std::move(value);
    if (!backoff.Sleep()) {
      return KeysMissingError(name_, "Get", {std::string(key)}, absl::Now() - start);
    }
  }
}

absl::Status PollingStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  Backoff backoff(start + timeout);
  std::vector<std::string> pending = keys;
  while (true) {
    SHARDKIT_ASSIGN_OR_RETURN(pending, Missing(pending, start + timeout));
    if (pending.empty()) return absl::OkStatus();
    if (!backoff.Sleep()) return KeysMissingError(name_, "Wait", pending, absl::Now() - start);
  }
}

absl::StatusOr<bool> PollingStore::Check(const std::vector<std::string>& keys) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> missing,
                            Missing(keys, absl::InfiniteFuture()));
  return missing.empty();
}

absl::StatusOr<std::vector<std::string>> PollingStore::Missing(const std::vector<std::string>& keys,
                                                               absl::Time deadline) {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    SHARDKIT_RETURN_IF_ERROR(ValidateKey(name_, key));
    SHARDKIT_ASSIGN_OR_RETURN(bool exists, Exists(key, deadline));
    if (!exists) missing.push_back(key);
  }
  return missing;
}

}  // namespace shardkit::internal
