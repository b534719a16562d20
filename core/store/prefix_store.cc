#include "core/store/prefix_store.h"

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/store/internal/store_util.h"

namespace shardkit {

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {
  SHARDKIT_CHECK(base_ != nullptr) << "PrefixStore needs a base store";
  SHARDKIT_CHECK(!prefix_.empty()) << "PrefixStore needs a non-empty prefix";
}

std::string PrefixStore::Full(std::string_view key) const {
  // An empty key stays empty so that the base store rejects it as such.
  return key.empty() ? std::string() : absl::StrCat(prefix_, "/", internal::AbslView(key));
}

std::vector<std::string> PrefixStore::Full(const std::vector<std::string>& keys) const {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const std::string& key : keys) full.push_back(Full(key));
  return full;
}

absl::Status PrefixStore::Set(std::string_view key, std::string_view value) {
  return base_->Set(Full(key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(std::string_view key, absl::Duration timeout) {
  return base_->Get(Full(key), timeout);
}

absl::Status PrefixStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  return base_->Wait(Full(keys), timeout);
}

absl::StatusOr<int64_t> PrefixStore::Add(std::string_view key, int64_t delta) {
  return base_->Add(Full(key), delta);
}

absl::StatusOr<bool> PrefixStore::Check(const std::vector<std::string>& keys) {
  return base_->Check(Full(keys));
}

}  // namespace shardkit
