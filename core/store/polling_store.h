// PollingStore: a Store whose Get/Wait/Check are built from two primitive probes, for backends
// that cannot block on a key (a directory, a Redis server). Subclasses implement TryGet and
// Exists; this class adds validation, the deadline, the backoff and the timeout message.
//
//   class FileStore final : public internal::PollingStore { ... TryGet/Exists/Set/Add ... };
#ifndef SHARDKIT_CORE_STORE_POLLING_STORE_H_
#define SHARDKIT_CORE_STORE_POLLING_STORE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/store.h"

namespace shardkit::internal {

class PollingStore : public Store {
 public:
  absl::StatusOr<std::string> Get(std::string_view key, absl::Duration timeout) final;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) final;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) final;

 protected:
  // `name` appears first in every error message, e.g. "FileStore(/data/run1)".
  explicit PollingStore(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  // The value of a valid `key`, or nullopt if it is not set. `deadline` is the caller's (infinite
  // for Check): a probe that waits on a server stops there. Errors: kUnavailable on I/O errors.
  [[nodiscard]] virtual absl::StatusOr<std::optional<std::string>> TryGet(std::string_view key,
                                                                          absl::Time deadline) = 0;
  // Whether a valid `key` is set. Errors: as TryGet.
  [[nodiscard]] virtual absl::StatusOr<bool> Exists(std::string_view key, absl::Time deadline) = 0;

 private:
  // The subset of `keys` not set yet (in order).
  absl::StatusOr<std::vector<std::string>> Missing(const std::vector<std::string>& keys,
                                                   absl::Time deadline);

  std::string name_;
};

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_STORE_POLLING_STORE_H_
