// JobRunId: a fresh run id that every process of a job derives from one shared store without
// talking to the others — how `shardkit launch` names a multi-host run, and how ranks started by
// another launcher (mpirun) that gives no run id of its own name theirs (core/comm/launcher_env.h).
//
//   // Each of the job's processes, with its own count of the job's `world` ranks:
//   SHARDKIT_ASSIGN_OR_RETURN(std::string id, JobRunId(*store, /*world=*/8, /*ranks_here=*/1));
//   // id == "job-w8-<G>", the same G in every process of the job.
#ifndef SHARDKIT_CORE_STORE_JOB_RUN_ID_H_
#define SHARDKIT_CORE_STORE_JOB_RUN_ID_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/store/store.h"

namespace shardkit {

// Adds `ranks_here` to the store's counter of joined ranks for jobs of `world` ranks; the count
// tells which job generation G this process joined: "job-w<world>-<G>". Every process of the job
// must call it exactly once, and the counts of the job's processes must sum to `world`; the ids
// are fresh provided earlier jobs on this store were joined completely.
// Errors: the store's (kUnavailable, kDeadlineExceeded, ...); kInvalidArgument if world < 1 or
// ranks_here is outside 1..world.
[[nodiscard]] absl::StatusOr<std::string> JobRunId(Store& store, int world, int ranks_here);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_JOB_RUN_ID_H_
