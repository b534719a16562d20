// MemoryStore: an in-process Store for tests whose ranks are threads of one process. Share one
// instance (e.g. through std::shared_ptr) between the threads. Get/Wait block on a condition
// variable, so they wake as soon as a key is set.
//
//   auto store = std::make_shared<MemoryStore>();
//   std::thread t([&] { (void)store->Set("ready", "1"); });
//   SHARDKIT_ASSIGN_OR_RETURN(std::string v, store->Get("ready", absl::Seconds(5)));
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDKIT_CORE_STORE_MEMORY_STORE_H_
#define SHARDKIT_CORE_STORE_MEMORY_STORE_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/store.h"

namespace shardkit {

class MemoryStore final : public Store {
 public:
  MemoryStore() = default;

  // Errors (all methods): kInvalidArgument for an empty key or one containing NUL.
  absl::Status Set(std::string_view key, std::string_view value) override;
  // Errors: kDeadlineExceeded naming the key and the time waited.
  absl::StatusOr<std::string> Get(std::string_view key, absl::Duration timeout) override;
  // Errors: kDeadlineExceeded listing the keys still missing and the time waited.
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  // Errors: kFailedPrecondition if the value is not an integer; kOutOfRange on overflow.
  absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

 private:
  // Blocks (with mu_ held by `lock`) until every key is set or the deadline passes; returns the
  // keys still missing.
  std::vector<std::string> WaitLocked(std::unique_lock<std::mutex>& lock,
                                      const std::vector<std::string>& keys, absl::Time deadline);

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;  // guarded by mu_
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_MEMORY_STORE_H_
