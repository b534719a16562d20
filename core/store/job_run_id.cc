#include "core/store/job_run_id.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace shardkit {

absl::StatusOr<std::string> JobRunId(Store& store, int world, int ranks_here) {
  if (world < 1 || ranks_here < 1 || ranks_here > world) {
    return absl::InvalidArgumentError(
        absl::StrCat("JobRunId: ", ranks_here, " ranks here do not fit a world of ", world));
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      int64_t joined,
      store.Add(absl::StrCat("shardkit-launch/world-", world, "/joined"), ranks_here));
  return absl::StrCat("job-w", world, "-", (joined - 1) / world);
}

}  // namespace shardkit
