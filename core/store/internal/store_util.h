// Helpers shared by the Store implementations (not part of the public API): key validation,
// counter arithmetic for Add, the deadline/backoff loop of polling stores, and the common
// "keys still missing" error, so every store reports timeouts the same way.
//
//   SHARDKIT_RETURN_IF_ERROR(internal::ValidateKey("FileStore", key));
//   return internal::KeysMissingError("FileStore(/dir)", "Wait", missing, elapsed);
#ifndef SHARDKIT_CORE_STORE_INTERNAL_STORE_UTIL_H_
#define SHARDKIT_CORE_STORE_INTERNAL_STORE_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace shardkit::internal {

// Debian's Abseil has its own string_view; std::string_view does not convert implicitly.
inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Errors: kInvalidArgument if `key` is empty or contains a NUL byte.
[[nodiscard]] absl::Status ValidateKey(std::string_view store, std::string_view key);

// kDeadlineExceeded: "<store>: <op> timed out after <waited>; keys still missing: "a", "b"".
[[nodiscard]] absl::Status KeysMissingError(std::string_view store, std::string_view op,
                                            const std::vector<std::string>& missing,
                                            absl::Duration waited);

// The new counter value for Add: `old` (absent = 0) parsed as a decimal int64, plus `delta`.
// Errors: kFailedPrecondition if `old` is not a decimal integer; kOutOfRange on overflow.
[[nodiscard]] absl::StatusOr<int64_t> AddToCounter(std::string_view store, std::string_view key,
                                                   const std::optional<std::string>& old,
                                                   int64_t delta);

// Exponential backoff for polling stores: 1 ms doubling up to 10 ms, never past the deadline.
class Backoff {
 public:
  explicit Backoff(absl::Time deadline) : deadline_(deadline) {}
  // Sleeps for the next interval; returns false (without sleeping) once the deadline has passed.
  bool Sleep();

 private:
  absl::Time deadline_;
  absl::Duration next_ = absl::Milliseconds(1);
};

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_STORE_INTERNAL_STORE_UTIL_H_
