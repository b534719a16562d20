// PrefixStore: a namespace inside another Store. Every key becomes "<prefix>/<key>", so two runs
// (or two sub-groups) sharing one directory or Redis database never see each other's keys.
//
//   std::shared_ptr<Store> base = ...;
//   PrefixStore run(base, "run-5f2c");          // keys "run-5f2c/..."
//   PrefixStore group(std::make_shared<PrefixStore>(run), "group1");  // nesting works
//
// Thread-safety: as thread-safe as the base store (every shardkit Store is).
#ifndef SHARDKIT_CORE_STORE_PREFIX_STORE_H_
#define SHARDKIT_CORE_STORE_PREFIX_STORE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/store.h"

namespace shardkit {

class PrefixStore final : public Store {
 public:
  // `base` must not be null; `prefix` must not be empty (both are checked: a bug, not input).
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);

  // Errors: those of the base store; messages name the full (prefixed) keys.
  absl::Status Set(std::string_view key, std::string_view value) override;
  absl::StatusOr<std::string> Get(std::string_view key, absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

  const std::string& prefix() const { return prefix_; }

 private:
  std::string Full(std::string_view key) const;
  std::vector<std::string> Full(const std::vector<std::string>& keys) const;

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_PREFIX_STORE_H_
