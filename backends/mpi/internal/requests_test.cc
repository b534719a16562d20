// RequestSet on a one-process MPI job (MPI's singleton start, no mpirun): messages to itself over
// MPI_COMM_SELF. (Open MPI's self path completes a truncated receive without an error, so MPI's
// errors are not tested here; the core agrees on every size before anything is posted.)
#include "backends/mpi/internal/requests.h"

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "backends/mpi/internal/job.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"

namespace shardkit::mpi_backend {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

class RequestSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Open MPI's session directory in this test's own folder.
    if (const char* dir = std::getenv("TEST_TMPDIR")) setenv("TMPDIR", dir, /*overwrite=*/1);
    SHARDKIT_ASSERT_OK(EnsureMpiInitialized());
  }
};

TEST_F(RequestSetTest, CutsTransfersIntoMessagesOfAtMostMaxBytes) {
  std::vector<uint8_t> out(1000), in(1000, 0);
  std::iota(out.begin(), out.end(), 0);
  RequestSet requests(MPI_COMM_SELF, /*tag=*/5, /*max_message=*/7);
  SHARDKIT_ASSERT_OK(requests.PostRecv(0, in.data(), in.size()));
  SHARDKIT_ASSERT_OK(requests.PostSend(0, out.data(), out.size()));
  EXPECT_EQ(requests.pending(), 2u * 143);  // ceil(1000 / 7) each way
  SHARDKIT_ASSERT_OK(requests.WaitAll(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(requests.pending(), 0u);
  EXPECT_EQ(in, out);
  EXPECT_EQ(requests.DescribeProgress(),
            "every transfer was confirmed (received 1000 of 1000 bytes, sent 1000 of 1000 bytes)");
}

TEST_F(RequestSetTest, DeadlineNamesThePeerNotHeardFrom) {
  std::vector<uint8_t> in(16), out(16, 7);
  RequestSet requests(MPI_COMM_SELF, /*tag=*/6);
  SHARDKIT_ASSERT_OK(requests.PostRecv(0, in.data(), in.size()));
  EXPECT_THAT(requests.WaitAll(absl::Now() + absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("not heard from rank 0 (received 0 of 16 bytes")));
  EXPECT_EQ(requests.pending(), 1u);
  // The late message still lands in the buffer: why the backend aborts instead of returning.
  SHARDKIT_ASSERT_OK(requests.PostSend(0, out.data(), out.size()));
  SHARDKIT_ASSERT_OK(requests.WaitAll(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(in, out);
}

}  // namespace
}  // namespace shardkit::mpi_backend
