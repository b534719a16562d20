#include "core/store/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/store/internal/store_util.h"

namespace shardkit {
void RedisStore::ReplyDeleter::operator()(redisReply* reply) const { freeReplyObject(reply); }

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Connect(std::string host, int port,
                                                                absl::Duration timeout) {
  std::unique_ptr<RedisStore> store(new RedisStore(std::move(host), port, timeout));
  std::lock_guard<std::mutex> lock(store->mu_);
  SHARDKIT_RETURN_IF_ERROR(store->EnsureConnectedLocked());
  return store;
}

RedisStore::RedisStore(std::string host, int port, absl::Duration timeout)
    : PollingStore(absl::StrCat("RedisStore(", host, ":", port, ")")),
      host_(std::move(host)),
      port_(port),
      timeout_(timeout) {}

RedisStore::~RedisStore() {
  if (context_ != nullptr) redisFree(context_);
}

absl::Status RedisStore::EnsureConnectedLocked() {
  if (context_ != nullptr) return absl::OkStatus();
  redisContext* context = redisConnectWithTimeout(host_.c_str(), port_, absl::ToTimeval(timeout_));
  if (context == nullptr) return absl::UnavailableError(absl::StrCat(name(), ": out of memory"));
  if (context->err != 0 || redisSetTimeout(context, absl::ToTimeval(timeout_)) != REDIS_OK) {
    std::string reason = context->errstr;
    redisFree(context);
    return absl::UnavailableError(absl::StrCat(name(), ": cannot connect: ", reason));
  }
  context_ = context;
  return absl::OkStatus();
}

absl::StatusOr<RedisStore::Reply> RedisStore::CommandOnceLocked(
    const std::vector<std::string_view>& argv) {
  SHARDKIT_RETURN_IF_ERROR(EnsureConnectedLocked());
  std::vector<const char*> data;
  std::vector<size_t> sizes;
  for (std::string_view arg : argv) {
    data.push_back(arg.data());
    sizes.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(argv.size()), data.data(), sizes.data()));
  if (reply == nullptr) {
    absl::Status error = absl::UnavailableError(
        absl::StrCat(name(), ": ", internal::AbslView(argv[0]), " failed: ", context_->errstr));
    redisFree(context_);  // The connection is unusable after an I/O or protocol error.
    context_ = nullptr;
    return error;
  }
  return Reply(reply);
}

absl::StatusOr<RedisStore::Reply> RedisStore::Command(const std::vector<std::string_view>& argv,
                                                      bool idempotent) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_connected = context_ != nullptr;
  absl::StatusOr<Reply> reply = CommandOnceLocked(argv);
  // Only a connection that broke (not one that could not be made) is worth a second try.
  if (!reply.ok() && idempotent && was_connected) reply = CommandOnceLocked(argv);
  return reply;
}

absl::Status RedisStore::Set(std::string_view key, std::string_view value) {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(name(), key));
  SHARDKIT_ASSIGN_OR_RETURN(Reply reply, Command({"SET", key, value}, /*idempotent=*/true));
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(absl::StrCat(name(), ": SET failed: ", reply->str));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RedisStore::Add(std::string_view key, int64_t delta) {
  SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey(name(), key));
  const std::string delta_text = absl::StrCat(delta);
  SHARDKIT_ASSIGN_OR_RETURN(Reply reply,
                            Command({"INCRBY", key, delta_text}, /*idempotent=*/false));
  if (reply->type == REDIS_REPLY_INTEGER) return static_cast<int64_t>(reply->integer);
  const std::string message = absl::StrCat(name(), ": Add(\"", internal::AbslView(key), "\", ",
                                           delta, "): ", reply->str != nullptr ? reply->str : "");
  if (absl::StrContains(message, "overflow")) return absl::OutOfRangeError(message);
  if (absl::StrContains(message, "not an integer")) {
    return absl::FailedPreconditionError(message);
  }
  return absl::UnavailableError(message);
}

// One command, bounded by the connection's own timeout.
absl::StatusOr<std::optional<std::string>> RedisStore::TryGet(std::string_view key,
                                                              absl::Time /*deadline*/) {
  SHARDKIT_ASSIGN_OR_RETURN(Reply reply, Command({"GET", key}, /*idempotent=*/true));
  if (reply->type == REDIS_REPLY_NIL) return std::nullopt;
  if (reply->type == REDIS_REPLY_STRING) return std::string(reply->str, reply->len);
  return absl::UnavailableError(
      absl::StrCat(name(), ": GET \"", internal::AbslView(key),
                   "\" failed: ", reply->str != nullptr ? reply->str : "?"));
}

absl::StatusOr<bool> RedisStore::Exists(std::string_view key, absl::Time /*deadline*/) {
  SHARDKIT_ASSIGN_OR_RETURN(Reply reply, Command({"EXISTS", key}, /*idempotent=*/true));
  if (reply->type == REDIS_REPLY_INTEGER) return reply->integer > 0;
  return absl::UnavailableError(
      absl::StrCat(name(), ": EXISTS \"", internal::AbslView(key),
                   "\" failed: ", reply->str != nullptr ? reply->str : "?"));
}

}  // namespace shardkit
