#include "backends/gloo/gloo_status.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "core/base/deadline.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"

namespace shardkit::gloo_backend {

std::chrono::milliseconds Remaining(absl::Time deadline) {
  return std::chrono::milliseconds(std::max(1, PollTimeoutMs(deadline)));
}

absl::Status FromException(std::exception_ptr error, const std::string& what) {
  const std::string prefix = what.empty() ? "" : what + ": ";
  try {
    std::rethrow_exception(error);
  } catch (const ::gloo::IoException& e) {
    const std::string message = prefix + e.what();
    // "Timed out": a buffer's wait; "Connect timeout": a pair's connect (see lazy_context.h).
    if (absl::StrContains(e.what(), "Timed out") ||
        absl::StrContains(e.what(), "Connect timeout")) {
      return absl::DeadlineExceededError(message);
    }
    return absl::UnavailableError(message);
  } catch (const ::gloo::EnforceNotMet& e) {
    return absl::InternalError(prefix + "Gloo invariant failed: " + e.what());
  } catch (const std::exception& e) {
    return absl::InternalError(prefix + e.what());
  } catch (...) {
    return absl::InternalError(prefix + "unknown exception from Gloo");
  }
}

}  // namespace shardkit::gloo_backend
