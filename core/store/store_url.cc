#include "core/store/store_url.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"
#include "core/store/file_store.h"
#include "core/store/internal/store_util.h"
#include "core/store/prefix_store.h"
#include "core/store/redis_store.h"

namespace shardkit {
namespace {

absl::Status BadUrl(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("store URL \"", url, "\": ", why,
                                                 " (expected file:///dir or "
                                                 "redis://host:port[/prefix])"));
}

absl::StatusOr<StoreUrl> ParseFileUrl(absl::string_view url, absl::string_view rest) {
  if (rest.empty()) return BadUrl(url, "empty path");
  if (rest[0] != '/') return BadUrl(url, "a file URL needs an absolute path and no host");
  StoreUrl parsed;
  parsed.kind = StoreUrl::Kind::kFile;
  parsed.path = std::string(rest);
  while (parsed.path.size() > 1 && parsed.path.back() == '/') parsed.path.pop_back();
  return parsed;
}

absl::StatusOr<StoreUrl> ParseRedisUrl(absl::string_view url, absl::string_view rest) {
  StoreUrl parsed;
  parsed.kind = StoreUrl::Kind::kRedis;
  absl::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.size() < rest.size()) {
    absl::string_view prefix = rest.substr(authority.size());
    while (absl::ConsumePrefix(&prefix, "/")) {
    }
    while (absl::ConsumeSuffix(&prefix, "/")) {
    }
    parsed.prefix = std::string(prefix);
  }
  size_t colon = authority.rfind(':');
  parsed.host = std::string(authority.substr(0, colon));
  if (parsed.host.empty()) return BadUrl(url, "missing host");
  if (colon != std::string_view::npos) {
    absl::string_view port = authority.substr(colon + 1);
    if (!absl::SimpleAtoi(port, &parsed.port) || parsed.port < 1 || parsed.port > 65535) {
      return BadUrl(url, absl::StrCat("bad port \"", port, "\""));
    }
  }
  return parsed;
}

}  // namespace

std::string StoreUrl::ToString() const {
  if (kind == Kind::kFile) return absl::StrCat("file://", path);
  std::string url = absl::StrCat("redis://", host, ":", port);
  if (!prefix.empty()) absl::StrAppend(&url, "/", prefix);
  return url;
}

absl::StatusOr<StoreUrl> ParseStoreUrl(std::string_view url_text) {
  absl::string_view url = internal::AbslView(url_text);
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "file://")) return ParseFileUrl(url, rest);
  if (absl::ConsumePrefix(&rest, "redis://")) return ParseRedisUrl(url, rest);
  return BadUrl(url, "unknown scheme");
}

absl::StatusOr<std::string> StoreUrlWithSubPrefix(std::string_view url,
                                                  std::string_view component) {
  if (component.empty() || absl::StrContains(internal::AbslView(component), '/')) {
    return absl::InvalidArgumentError(absl::StrCat("store namespace component \"",
                                                   internal::AbslView(component),
                                                   "\" must be non-empty, no '/'"));
  }
  SHARDKIT_ASSIGN_OR_RETURN(StoreUrl parsed, ParseStoreUrl(url));
  if (parsed.kind == StoreUrl::Kind::kFile) {
    parsed.path =
        absl::StrCat(parsed.path == "/" ? "" : parsed.path, "/", internal::AbslView(component));
  } else {
    parsed.prefix = parsed.prefix.empty()
                        ? std::string(component)
                        : absl::StrCat(parsed.prefix, "/", internal::AbslView(component));
  }
  return parsed.ToString();
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url, absl::Duration timeout) {
  SHARDKIT_ASSIGN_OR_RETURN(StoreUrl parsed, ParseStoreUrl(url));
  if (parsed.kind == StoreUrl::Kind::kFile) {
    SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store, FileStore::Open(parsed.path));
    return std::unique_ptr<Store>(std::move(store));
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<RedisStore> redis,
                            RedisStore::Connect(parsed.host, parsed.port, timeout));
  if (parsed.prefix.empty()) return std::unique_ptr<Store>(std::move(redis));
  return std::unique_ptr<Store>(
      std::make_unique<PrefixStore>(std::shared_ptr<Store>(std::move(redis)), parsed.prefix));
}

}  // namespace shardkit
