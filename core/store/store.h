// Store: the key/value rendezvous every rank of a job shares (Gloo's contexts and NCCL's unique id
// are bootstrapped through it).
//
// Implementations: FileStore (a directory; the default on one machine), PrefixStore (namespacing:
// every run uses a fresh prefix, so a reused directory or Redis database never mixes two runs),
// an in-process store for thread tests, and RedisStore (multi-host). Open one from a URL:
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore("file:///tmp/run1"));
//   SHARDKIT_RETURN_IF_ERROR(store->Set("rank0/addr", "127.0.0.1:4000"));
//   SHARDKIT_ASSIGN_OR_RETURN(std::string v, store->Get("rank0/addr", absl::Seconds(30)));
//
// Keys are non-empty byte strings without NUL; values are arbitrary bytes. Set overwrites.
// Thread-safety: every method is safe to call concurrently, from threads and from processes
// sharing the same backing directory/server.
#ifndef SHARDKIT_CORE_STORE_STORE_H_
#define SHARDKIT_CORE_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardkit {

class Store {
 public:
  virtual ~Store() = default;

  // Stores `value` under `key`, replacing any earlier value. Readers never see a partial value.
  [[nodiscard]] virtual absl::Status Set(std::string_view key, std::string_view value) = 0;

  // The value of `key`, waiting up to `timeout` for it to be set.
  // Errors: kDeadlineExceeded naming the key and the time waited; kUnavailable on I/O errors.
  [[nodiscard]] virtual absl::StatusOr<std::string> Get(std::string_view key,
                                                        absl::Duration timeout) = 0;

  // Waits until every key exists. Errors: kDeadlineExceeded listing the keys still missing.
  [[nodiscard]] virtual absl::Status Wait(const std::vector<std::string>& keys,
                                          absl::Duration timeout) = 0;

  // Atomically adds `delta` to the integer stored at `key` (absent = 0); returns the new value.
  [[nodiscard]] virtual absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta) = 0;

  // True if every key exists now (no waiting).
  [[nodiscard]] virtual absl::StatusOr<bool> Check(const std::vector<std::string>& keys) = 0;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_STORE_H_
