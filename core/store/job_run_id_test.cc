#include "core/store/job_run_id.h"

#include "core/store/memory_store.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::absl::StatusCode;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

// Two hosts of 2 ranks each (one call per host), then four ranks of one call each: each job gets
// its own generation, whatever the split of its ranks.
TEST(JobRunIdTest, EveryProcessOfAJobGetsTheSameFreshId) {
  MemoryStore store;
  EXPECT_THAT(JobRunId(store, 4, 2), IsOkAndHolds("job-w4-0"));
  EXPECT_THAT(JobRunId(store, 4, 2), IsOkAndHolds("job-w4-0"));
  for (int rank = 0; rank < 4; ++rank) EXPECT_THAT(JobRunId(store, 4, 1), IsOkAndHolds("job-w4-1"));
  // Another world size counts apart.
  EXPECT_THAT(JobRunId(store, 3, 3), IsOkAndHolds("job-w3-0"));
}

TEST(JobRunIdTest, RejectsCountsOutsideTheWorld) {
  MemoryStore store;
  EXPECT_THAT(JobRunId(store, 2, 3),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("world of 2")));
  EXPECT_THAT(JobRunId(store, 0, 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("world of 0")));
}

}  // namespace
}  // namespace shardkit
