// FileStore: a Store kept in a directory that concurrent processes on one machine share — the
// embedded default (`shardkit launch` makes a fresh temporary one per run).
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store, FileStore::Open("/data/run1"));
//   SHARDKIT_RETURN_IF_ERROR(store->Set("rank0/addr", "127.0.0.1:4000"));
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t joined, store->Add("joined", 1));
//
// Layout: one file per key, named from the key with every byte outside [A-Za-z0-9_-] written as
// %XX (so keys may contain '/' and arbitrary bytes). Set writes a temporary file and renames it
// over the key's file, so readers never see a partial value. Add holds an flock(2) on a per-key
// lock file, so it is atomic across threads and processes. Get/Wait poll (1 ms doubling to 10 ms).
// Keys whose encoded name exceeds 200 bytes are rejected.
// Thread-safety: all methods are safe to call concurrently, from any number of processes.
#ifndef SHARDKIT_CORE_STORE_FILE_STORE_H_
#define SHARDKIT_CORE_STORE_FILE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/store/polling_store.h"

namespace shardkit {

class FileStore final : public internal::PollingStore {
 public:
  // Opens the store in `dir`, creating it and its parents if needed.
  // Errors: kInvalidArgument if `dir` is empty, or it or a parent is not a directory (ENOTDIR)
  // or its name is too long; kPermissionDenied if it cannot be created (EACCES, EPERM, EROFS);
  // kUnavailable on other I/O errors. Every message names the path.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FileStore>> Open(std::string dir);

  // Errors: kInvalidArgument for a bad or too long key; kUnavailable on I/O errors.
  absl::Status Set(std::string_view key, std::string_view value) override;
  // Errors: as Set; kFailedPrecondition if the value is not an integer; kOutOfRange on overflow.
  absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta) override;

  const std::string& dir() const { return dir_; }

 private:
  explicit FileStore(std::string dir);

  absl::StatusOr<std::optional<std::string>> TryGet(std::string_view key,
                                                    absl::Time deadline) override;
  absl::StatusOr<bool> Exists(std::string_view key, absl::Time deadline) override;

  // The key's encoded file name (without the k_/l_/t_ kind prefix).
  absl::StatusOr<std::string> Encode(std::string_view key) const;
  absl::StatusOr<std::optional<std::string>> ReadEncoded(const std::string& encoded);
  absl::Status WriteEncoded(const std::string& encoded, std::string_view value);
  std::string PathOf(char kind, const std::string& encoded) const;

  std::string dir_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_FILE_STORE_H_
