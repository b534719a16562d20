// TcpStore: a Store on a TcpStoreServer (tcp://host:port), for multi-host jobs without Redis. The
// server is held by `shardkit launch` on the host of rank 0 (or by rank 0's own process); every
// rank is a client. Usually opened from a URL (`OpenStore("tcp://10.0.0.5:29500/jobs")`, which adds
// a PrefixStore for the prefix).
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> store,
//                             TcpStore::Connect("10.0.0.5", 29500, absl::Seconds(60)));
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t joined, store->Add("joined", 1));  // atomic on the server
//
// Get/Wait/Check poll the server (1 ms doubling to 10 ms), as RedisStore does. One connection per
// instance, guarded by a mutex; every request is bounded by the timeout given to Connect (and by
// the deadline of the Get or Wait it serves, less 100 ms of slack). After a
// connection error the next request reconnects once; Set, Get and Exists are retried once on a
// fresh connection, Add is not (it may already have been applied). Errors name the store:
// "TcpStore(tcp://10.0.0.5:29500): GET "k": the connection was closed by the other side (...)".
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDKIT_CORE_STORE_TCP_STORE_H_
#define SHARDKIT_CORE_STORE_TCP_STORE_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/os/fd.h"
#include "core/store/polling_store.h"

namespace shardkit {

class TcpStore final : public internal::PollingStore {
 public:
  // Connects to host:port, retrying while nothing accepts there yet (the server's process may
  // start later), until `timeout` has passed; `timeout` then bounds each request.
  // Errors: kUnavailable naming the store if no server accepted in time; kNotFound for a host
  // that does not resolve; kDataLoss if what answers is not a shardkit tcp store.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TcpStore>> Connect(
      std::string host, int port, absl::Duration timeout = absl::Seconds(10));

  // Get, Wait, Check, Set and Add: kInvalidArgument for a bad key (or one over 4 KiB) or a value
  // over 16 MiB; kUnavailable if the server
  // is gone; kDeadlineExceeded if it does not reply within the timeout.
  absl::Status Set(std::string_view key, std::string_view value) override;
  // Errors: as Set; kFailedPrecondition if the value is not an integer; kOutOfRange on overflow.
  absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta) override;

 private:
  TcpStore(std::string host, int port, absl::Duration timeout);

  absl::StatusOr<std::optional<std::string>> TryGet(std::string_view key,
                                                    absl::Time deadline) override;
  absl::StatusOr<bool> Exists(std::string_view key, absl::Time deadline) override;

  // One connection attempt and the hello. Requires mu_.
  absl::Status ConnectLocked(absl::Time deadline);
  // Sends a request body and returns the payload of its success reply; a server error reply is
  // returned as its Status. `what` names the request in messages (`GET "key"`). The reply is
  // awaited up to the timeout, and not past `deadline` (the caller's; at least 100 ms are given).
  absl::StatusOr<std::string> Request(std::string_view what, const std::string& body,
                                      bool idempotent,
                                      absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<std::string> RequestOnceLocked(const std::string& body, absl::Time deadline);
  absl::Status Annotate(std::string_view what, const absl::Status& status) const;

  const std::string host_;
  const int port_;
  const absl::Duration timeout_;
  std::mutex mu_;
  os::Fd fd_;  // guarded by mu_; empty when disconnected
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_TCP_STORE_H_
