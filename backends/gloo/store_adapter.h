// StoreAdapter: presents a shardkit Store to Gloo's rendezvous as a ::gloo::rendezvous::Store,
// under a key prefix and bounded by a deadline. Internal to the Gloo backend: it throws
// ::gloo::IoException (Gloo's contract), which the backend catches at its edge.
#ifndef SHARDKIT_BACKENDS_GLOO_STORE_ADAPTER_H_
#define SHARDKIT_BACKENDS_GLOO_STORE_ADAPTER_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/store/store.h"
#include "gloo/rendezvous/store.h"

namespace shardkit::gloo_backend {

class StoreAdapter : public ::gloo::rendezvous::Store {
 public:
  // `store` must outlive the adapter.
  StoreAdapter(shardkit::Store& store, std::string prefix, absl::Time deadline)
      : store_(store), prefix_(std::move(prefix)), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string Key(const std::string& key) const { return prefix_ + "/" + key; }

  shardkit::Store& store_;
  const std::string prefix_;
  const absl::Time deadline_;
};

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_STORE_ADAPTER_H_
