// RedisStore: a Store on a redis-server, for jobs that span machines. Usually opened from a URL
// (`OpenStore("redis://10.0.0.5:6379/jobs")`, which adds a PrefixStore for the prefix).
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<RedisStore> store,
//                             RedisStore::Connect("10.0.0.5", 6379, absl::Seconds(10)));
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t joined, store->Add("joined", 1));  // INCRBY
//
// Set is SET, Add is INCRBY (atomic on the server), Get/Wait poll GET/EXISTS (1 ms doubling to
// 10 ms). One connection per instance, guarded by a mutex. After a connection error the next
// command reconnects; idempotent commands (SET, GET, EXISTS) are retried once on a fresh
// connection, INCRBY is not (it may already have been applied) and reports kUnavailable.
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDKIT_CORE_STORE_REDIS_STORE_H_
#define SHARDKIT_CORE_STORE_REDIS_STORE_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/polling_store.h"

struct redisContext;
struct redisReply;

namespace shardkit {

class RedisStore final : public internal::PollingStore {
 public:
  // Connects to host:port; `timeout` bounds connecting and each command.
  // Errors: kUnavailable naming host:port and the reason (refused, timed out, unknown host).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RedisStore>> Connect(
      std::string host, int port, absl::Duration timeout = absl::Seconds(10));
  ~RedisStore() override;

  // Errors: kInvalidArgument for a bad key; kUnavailable if the server cannot be reached.
  absl::Status Set(std::string_view key, std::string_view value) override;
  // Errors: as Set; kFailedPrecondition if the value is not an integer; kOutOfRange on overflow.
  absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta) override;

 private:
  struct ReplyDeleter {
    void operator()(redisReply* reply) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

  RedisStore(std::string host, int port, absl::Duration timeout);

  absl::StatusOr<std::optional<std::string>> TryGet(std::string_view key,
                                                    absl::Time deadline) override;
  absl::StatusOr<bool> Exists(std::string_view key, absl::Time deadline) override;

  // (Re)connects if there is no live connection. Requires mu_.
  absl::Status EnsureConnectedLocked();
  // Runs one command; on a connection error drops the connection and, if `idempotent`, retries
  // once on a fresh one. A Redis error reply is returned as a reply, not as a Status.
  absl::StatusOr<Reply> Command(const std::vector<std::string_view>& argv, bool idempotent);
  absl::StatusOr<Reply> CommandOnceLocked(const std::vector<std::string_view>& argv);

  const std::string host_;
  const int port_;
  const absl::Duration timeout_;
  std::mutex mu_;
  redisContext* context_ = nullptr;  // guarded by mu_; null when disconnected
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_REDIS_STORE_H_
