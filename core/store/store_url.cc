#include "core/store/store_url.h"

#include <mutex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"
#include "core/store/file_store.h"
#include "core/store/internal/store_util.h"
#include "core/store/prefix_store.h"
#include "core/store/redis_store.h"
#include "core/store/tcp_store.h"
#include "core/store/tcp_store_server.h"

namespace shardkit {
namespace {

absl::Status BadUrl(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("store URL \"", url, "\": ", why,
                                                 " (expected file:///dir, "
                                                 "redis://host:port[/prefix] or "
                                                 "tcp://host:port[/prefix])"));
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

// redis:// and tcp://: host, port (required for tcp://), optional prefix.
absl::StatusOr<StoreUrl> ParseHostUrl(StoreUrl::Kind kind, absl::string_view url,
                                      absl::string_view rest) {
  StoreUrl parsed;
  parsed.kind = kind;
  const bool tcp = kind == StoreUrl::Kind::kTcp;
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
  if (colon == std::string_view::npos && tcp) {
    return BadUrl(url, "a tcp:// URL needs a port (tcp://host:port; 0 picks a free one)");
  }
  if (colon != std::string_view::npos) {
    absl::string_view port = authority.substr(colon + 1);
    if (!absl::SimpleAtoi(port, &parsed.port) || parsed.port < (tcp ? 0 : 1) ||
        parsed.port > 65535) {
      return BadUrl(url, absl::StrCat("bad port \"", port, "\""));
    }
  }
  return parsed;
}

// The process-wide tcp:// servers rank 0 started (OpenStoreAsRank): they live until it exits.
absl::Status ServeUntilExit(const StoreUrl& url) {
  static auto* mu = new std::mutex();
  static auto* servers = new std::vector<std::unique_ptr<TcpStoreServer>>();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(url.host, url.port);
  if (absl::IsAlreadyExists(server.status())) return absl::OkStatus();  // served already
  if (!server.ok()) {
    return absl::Status(
        server.status().code(),
        absl::StrCat("serving store ", url.ToString(), " (rank 0): ", server.status().message()));
  }
  std::lock_guard<std::mutex> lock(*mu);
  servers->push_back(*std::move(server));
  return absl::OkStatus();
}

std::unique_ptr<Store> WithPrefix(std::unique_ptr<Store> store, const std::string& prefix) {
  if (prefix.empty()) return store;
  return std::make_unique<PrefixStore>(std::shared_ptr<Store>(std::move(store)), prefix);
}

}  // namespace

std::string StoreUrl::ToString() const {
  if (kind == Kind::kFile) return absl::StrCat("file://", path);
  std::string url = absl::StrCat(kind == Kind::kTcp ? "tcp://" : "redis://", host, ":", port);
  if (!prefix.empty()) absl::StrAppend(&url, "/", prefix);
  return url;
}

absl::StatusOr<StoreUrl> ParseStoreUrl(std::string_view url_text) {
  absl::string_view url = internal::AbslView(url_text);
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "file://")) return ParseFileUrl(url, rest);
  if (absl::ConsumePrefix(&rest, "redis://"))
    return ParseHostUrl(StoreUrl::Kind::kRedis, url, rest);
  if (absl::ConsumePrefix(&rest, "tcp://")) return ParseHostUrl(StoreUrl::Kind::kTcp, url, rest);
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
  if (parsed.kind == StoreUrl::Kind::kRedis) {
    SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<RedisStore> redis,
                              RedisStore::Connect(parsed.host, parsed.port, timeout));
    return WithPrefix(std::move(redis), parsed.prefix);
  }
  if (parsed.port == 0) {
    return BadUrl(internal::AbslView(url),
                  "port 0 (any free port) is for `shardkit launch --store`, which serves the "
                  "store and gives its ranks the real port");
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> tcp,
                            TcpStore::Connect(parsed.host, parsed.port, timeout));
  return WithPrefix(std::move(tcp), parsed.prefix);
}

absl::StatusOr<std::unique_ptr<Store>> OpenStoreAsRank(std::string_view url, int rank,
                                                       absl::Duration timeout) {
  SHARDKIT_ASSIGN_OR_RETURN(StoreUrl parsed, ParseStoreUrl(url));
  if (parsed.kind == StoreUrl::Kind::kTcp && rank == 0 && parsed.port != 0) {
    SHARDKIT_RETURN_IF_ERROR(ServeUntilExit(parsed));
  }
  return OpenStore(url, timeout);
}

}  // namespace shardkit
