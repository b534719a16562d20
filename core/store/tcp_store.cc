#include "core/store/tcp_store.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/socket.h"
#include "core/store/internal/store_util.h"
#include "core/store/internal/tcp_socket.h"
#include "core/store/internal/tcp_wire.h"

namespace shardkit {

namespace wire = internal::tcp_wire;

namespace {

// A request always gets this long, even for a Get whose deadline has (nearly) passed.
constexpr absl::Duration kMinRequestTime = absl::Milliseconds(100);

// What a client should suspect when the connection breaks.
constexpr char kServerGone[] =
    " (did the process serving the store exit: the launcher of rank 0, or rank 0?)";

std::string Quoted(std::string_view op, std::string_view key) {
  return absl::StrCat(internal::AbslView(op), " \"", absl::CHexEscape(internal::AbslView(key)),
                      "\"");
}

// Errors: kInvalidArgument for a key that is empty, holds a NUL or is longer than the protocol's
// limit (the server would close the connection), or a value over the limit.
absl::Status CheckSizes(std::string_view store, std::string_view key, size_t value_size = 0) {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(store, key));
  if (key.size() <= wire::kMaxKey && value_size <= wire::kMaxValue) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(internal::AbslView(store), ": key \"",
                   absl::CHexEscape(internal::AbslView(key.substr(0, 64))), "\" (", key.size(),
                   " bytes) or value (", value_size, " bytes) over the limits (", wire::kMaxKey,
                   " and ", wire::kMaxValue, " bytes)"));
}

bool Retryable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(std::string host, int port,
                                                            absl::Duration timeout) {
  std::unique_ptr<TcpStore> store(new TcpStore(std::move(host), port, timeout));
  const absl::Time start = absl::Now();
  absl::Duration pause = absl::Milliseconds(10);
  std::lock_guard<std::mutex> lock(store->mu_);
  absl::Status refused;  // why the last attempt that got an answer failed ("refused")
  while (true) {
    absl::Status status = store->ConnectLocked(start + timeout);
    if (status.ok()) return store;
    if (!absl::IsDeadlineExceeded(status)) refused = status;
    const absl::Duration left = start + timeout - absl::Now();
    if (!Retryable(status) || left <= absl::ZeroDuration()) {
      return store->Annotate(
          absl::StrCat("cannot connect within ", absl::FormatDuration(absl::Now() - start)),
          refused.ok() ? status : refused);
    }
    absl::SleepFor(std::min(pause, left));
    pause = std::min(pause * 2, absl::Milliseconds(200));
  }
}

TcpStore::TcpStore(std::string host, int port, absl::Duration timeout)
    : PollingStore(absl::StrCat("TcpStore(tcp://", host, ":", port, ")")),
      host_(std::move(host)),
      port_(port),
      timeout_(timeout) {}

absl::Status TcpStore::Annotate(std::string_view what, const absl::Status& status) const {
  const bool gone = absl::IsUnavailable(status);
  return absl::Status(status.code(), absl::StrCat(name(), ": ", internal::AbslView(what), ": ",
                                                  status.message(), gone ? kServerGone : ""));
}

absl::Status TcpStore::ConnectLocked(absl::Time deadline) {
  SHARDKIT_ASSIGN_OR_RETURN(os::Fd fd, os::ConnectTcp(host_, port_, deadline));
  fd_ = std::move(fd);
  absl::StatusOr<std::string> reply =
      RequestOnceLocked(wire::EncodeHello(), std::min(deadline, absl::Now() + timeout_));
  if (!reply.ok()) return reply.status();
  wire::Reader reader(*reply);
  if (reader.String() != wire::kMagic || !reader.AtEnd()) {
    fd_.reset();
    return absl::DataLossError("the server's hello is not a shardkit tcp store's");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStore::RequestOnceLocked(const std::string& body,
                                                        absl::Time deadline) {
  const absl::Time start = absl::Now();
  absl::Status sent = internal::SendAll(fd_.get(), wire::EncodeFrame(body), deadline);
  absl::StatusOr<std::string> reply =
      sent.ok() ? internal::RecvFrame(fd_.get(), wire::kMaxFrame, deadline) : sent;
  if (!reply.ok()) {
    fd_.reset();  // A connection with a request in flight cannot be reused.
    if (absl::IsDeadlineExceeded(reply.status())) {
      return absl::DeadlineExceededError(
          absl::StrCat("no reply within ", absl::FormatDuration(absl::Now() - start)));
    }
    return reply.status();
  }
  wire::Reader reader(*reply);
  const std::optional<uint8_t> status = reader.Byte();
  if (status == 0) return std::string(std::string_view(*reply).substr(1));
  const std::optional<uint8_t> code = reader.Byte();
  const std::optional<std::string_view> message = reader.String();
  if (status != 1 || !code.has_value() || *code == 0 || *code > 16 || !message.has_value()) {
    fd_.reset();
    return absl::DataLossError("malformed reply");
  }
  return absl::Status(static_cast<absl::StatusCode>(*code),
                      absl::StrCat(name(), ": ", internal::AbslView(*message)));
}

absl::StatusOr<std::string> TcpStore::Request(std::string_view what, const std::string& body,
                                              bool idempotent, absl::Time deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  deadline = std::min(now + timeout_, std::max(deadline, now + kMinRequestTime));
  absl::StatusOr<std::string> reply = absl::UnavailableError("not connected");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool was_connected = fd_.get() >= 0;
    absl::Status connected = was_connected ? absl::OkStatus() : ConnectLocked(deadline);
    reply = connected.ok() ? RequestOnceLocked(body, deadline) : connected;
    // Only a connection that broke (not one that could not be made, nor a server that did not
    // reply in time) is worth a second try.
    if (reply.ok() || fd_.get() >= 0 || !idempotent || !was_connected ||
        !absl::IsUnavailable(reply.status())) {
      break;
    }
  }
  // Error replies of the server (a bad key, Add on a non-integer) already name the store.
  if (reply.ok() || !(Retryable(reply.status()) || absl::IsDataLoss(reply.status()))) return reply;
  return Annotate(what, reply.status());
}

absl::Status TcpStore::Set(std::string_view key, std::string_view value) {
  SHARDKIT_RETURN_IF_ERROR(CheckSizes(name(), key, value.size()));
  return Request(Quoted("SET", key), wire::EncodeSet(key, value), /*idempotent=*/true).status();
}

absl::StatusOr<int64_t> TcpStore::Add(std::string_view key, int64_t delta) {
  SHARDKIT_RETURN_IF_ERROR(CheckSizes(name(), key));
  SHARDKIT_ASSIGN_OR_RETURN(
      std::string payload,
      Request(Quoted("ADD", key), wire::EncodeAdd(key, delta), /*idempotent=*/false));
  std::optional<int64_t> value = wire::Reader(payload).Int64();
  if (!value.has_value()) return Annotate(Quoted("ADD", key), absl::DataLossError("bad reply"));
  return *value;
}

absl::StatusOr<std::optional<std::string>> TcpStore::TryGet(std::string_view key,
                                                            absl::Time deadline) {
  SHARDKIT_RETURN_IF_ERROR(CheckSizes(name(), key));
  SHARDKIT_ASSIGN_OR_RETURN(std::string payload,
                            Request(Quoted("GET", key), wire::EncodeGet(key), true, deadline));
  wire::Reader reader(payload);
  const std::optional<uint8_t> found = reader.Byte();
  if (found == 0) return std::nullopt;
  std::optional<std::string_view> value = reader.String(wire::kMaxValue);
  if (found != 1 || !value.has_value()) {
    return Annotate(Quoted("GET", key), absl::DataLossError("bad reply"));
  }
  return std::string(*value);
}

absl::StatusOr<bool> TcpStore::Exists(std::string_view key, absl::Time deadline) {
  SHARDKIT_RETURN_IF_ERROR(CheckSizes(name(), key));
  SHARDKIT_ASSIGN_OR_RETURN(
      std::string payload, Request(Quoted("EXISTS", key), wire::EncodeExists(key), true, deadline));
  const std::optional<uint8_t> found = wire::Reader(payload).Byte();
  if (!found.has_value() || *found > 1) {
    return Annotate(Quoted("EXISTS", key), absl::DataLossError("bad reply"));
  }
  return *found == 1;
}

}  // namespace shardkit
