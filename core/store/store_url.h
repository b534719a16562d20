// Store URLs: how SHARDKIT_STORE and `shardkit launch --store` name a Store.
//
//   file:///abs/dir                  FileStore in /abs/dir (created if needed)
//   redis://host[:port][/prefix]     RedisStore (port 6379 by default); keys live under
//                                    "prefix/" when a prefix is given (it may contain '/')
//   tcp://host:port[/prefix]         TcpStore, a client of the TcpStoreServer that the process of
//                                    rank 0 (or `shardkit launch` on its host) serves on
//                                    host:port; prefix as for redis://. Port 0 ("any free port")
//                                    only for `shardkit launch`, which replaces it by the real one.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore("file:///data/run1"));
//   // A fresh namespace per run: file:///data/run1/<id>, redis://h:6379/jobs/<id>.
//   SHARDKIT_ASSIGN_OR_RETURN(std::string run_url, StoreUrlWithSubPrefix(url, run_id));
#ifndef SHARDKIT_CORE_STORE_STORE_URL_H_
#define SHARDKIT_CORE_STORE_STORE_URL_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/store/store.h"

namespace shardkit {

struct StoreUrl {
  enum class Kind { kFile, kRedis, kTcp };
  Kind kind = Kind::kFile;
  std::string path;    // kFile: the absolute directory, without a trailing '/'
  std::string host;    // kRedis, kTcp
  int port = 6379;     // kRedis, kTcp (required in a tcp:// URL; 0 there means any free port)
  std::string prefix;  // kRedis, kTcp: key prefix without leading or trailing '/'; may be empty

  // The canonical URL text (ParseStoreUrl(x.ToString()) == x).
  std::string ToString() const;
};

// Errors: kInvalidArgument naming the URL and what is wrong (unknown scheme, relative or empty
// file path, file URL with a host, missing host, bad or (tcp://) missing port).
[[nodiscard]] absl::StatusOr<StoreUrl> ParseStoreUrl(std::string_view url);

// Opens the store `url` names. `timeout` bounds connecting (Redis; tcp://, retrying while the
// server is not up yet) and each server command.
// Errors: those of ParseStoreUrl, FileStore::Open, RedisStore::Connect and TcpStore::Connect;
// kInvalidArgument for a tcp:// URL with port 0.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenStore(
    std::string_view url, absl::Duration timeout = absl::Seconds(10));

// OpenStore for the process of `rank`. For a tcp:// URL, rank 0 first serves the store from a
// thread of this process (kept until the process exits), unless its port is already served —
// by `shardkit launch` on this host, or an earlier call — then connects as every rank does.
// Errors: those of OpenStore; of TcpStoreServer::Start (rank 0: the host is not this machine).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenStoreAsRank(std::string_view url, int rank,
                                                                     absl::Duration timeout);

// `url` with `component` appended to its namespace: a sub-directory for file://, a further
// prefix segment for redis://. Errors: those of ParseStoreUrl; kInvalidArgument if `component`
// is empty or contains '/'.
[[nodiscard]] absl::StatusOr<std::string> StoreUrlWithSubPrefix(std::string_view url,
                                                                std::string_view component);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_STORE_URL_H_
