#include "core/store/internal/store_util.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardkit::internal {

absl::Status ValidateKey(std::string_view store, std::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError(absl::StrCat(AbslView(store), ": empty key"));
  if (key.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(store), ": key \"", absl::CHexEscape(AbslView(key)), "\" contains a NUL byte"));
  }
  return absl::OkStatus();
}

absl::Status KeysMissingError(std::string_view store, std::string_view op,
                              const std::vector<std::string>& missing, absl::Duration waited) {
  std::string keys = absl::StrJoin(missing, ", ", [](std::string* out, const std::string& key) {
    absl::StrAppend(out, "\"", absl::CHexEscape(key), "\"");
  });
  return absl::DeadlineExceededError(absl::StrCat(AbslView(store), ": ", AbslView(op),
                                                  " timed out after ", absl::FormatDuration(waited),
                                                  "; keys still missing: ", keys));
}

absl::StatusOr<int64_t> AddToCounter(std::string_view store, std::string_view key,
                                     const std::optional<std::string>& old, int64_t delta) {
  int64_t value = 0;
  if (old.has_value() && !absl::SimpleAtoi(*old, &value)) {
    return absl::FailedPreconditionError(
        absl::StrCat(AbslView(store), ": Add(\"", absl::CHexEscape(AbslView(key)), "\"): value \"",
                     absl::CHexEscape(old->substr(0, 32)), "\" is not an integer"));
  }
  int64_t result = 0;
  if (__builtin_add_overflow(value, delta, &result)) {
    return absl::OutOfRangeError(absl::StrCat(AbslView(store), ": Add(\"",
                                              absl::CHexEscape(AbslView(key)), "\", ", delta,
                                              ") overflows ", value));
  }
  return result;
}

bool Backoff::Sleep() {
  absl::Duration remaining = deadline_ - absl::Now();
  if (remaining <= absl::ZeroDuration()) return false;
  absl::SleepFor(std::min(next_, remaining));
  next_ = std::min(next_ * 2, absl::Milliseconds(10));
  return true;
}

}  // namespace shardkit::internal
