// Gloo's errors and timeouts as the rest of shardkit wants them. Internal to the Gloo backend:
// Gloo throws (IoException, EnforceNotMet, ...) and takes relative timeouts; shardkit returns
// absl::Status and carries absolute deadlines. Every Gloo call of the backend is wrapped in
// try/catch and its exception goes through FromException, so that one table decides the codes.
#ifndef SHARDKIT_BACKENDS_GLOO_GLOO_STATUS_H_
#define SHARDKIT_BACKENDS_GLOO_GLOO_STATUS_H_

#include <chrono>
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardkit::gloo_backend {

// Milliseconds left until `deadline`, at least 1: Gloo treats its timeouts as relative and reads
// 0 as "no timeout" in places.
std::chrono::milliseconds Remaining(absl::Time deadline);

// `error` (thrown by Gloo) as a Status, its message prefixed with `what` (the step or the peer;
// may be empty): IoException "Timed out" or "Connect timeout" -> kDeadlineExceeded, other
// IoException -> kUnavailable, EnforceNotMet and anything else -> kInternal.
absl::Status FromException(std::exception_ptr error, const std::string& what);

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_GLOO_STATUS_H_
