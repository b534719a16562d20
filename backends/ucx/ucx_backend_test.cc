// The UCX backend's own rules on real forked ranks: the transports it uses between processes of
// one host (shared memory, with UCX's error handling on), UCX_TLS, waits that do not spin, the
// allocator's blocks registered once and withdrawn after a failed exchange, a rank that never
// joins.
#include <time.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "backends/ucx/internal/registrations.h"
#include "backends/ucx/internal/ucx_context.h"
#include "backends/ucx/ucx_communicator.h"
#include "core/comm/connect.h"
#include "core/tensor/allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit::ucx_backend {
namespace {

using ::shardkit::testing::ForkRanks;
using ::shardkit::testing::RankOptions;
using ::shardkit::testing::RunRanks;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A small and a large (rendezvous) broadcast from rank 0, then what the endpoint uses.
std::string BroadcastAndDescribe(int rank, Communicator& comm) {
  for (size_t bytes : {size_t{64}, size_t{8} << 20}) {
    std::vector<uint8_t> data(bytes, rank == 0 ? 7 : 0);
    SHARDKIT_EXPECT_OK(comm.Broadcast(MutableBuffer(data), 0));
    EXPECT_EQ(data.back(), 7);
  }
  absl::StatusOr<std::string> info = UcxEndpointInfo(comm, 1 - rank);
  SHARDKIT_EXPECT_OK(info.status());
  return info.value_or("");
}

TEST(UcxBackend, OneHostUsesSharedMemoryAndSingleCopyCma) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "ucx", [](int rank, Communicator& comm) {
    const std::string info = BroadcastAndDescribe(rank, comm);
    // Small messages through a shared-memory segment, large ones read by CMA; no TCP.
    EXPECT_THAT(info, AllOf(AnyOf(HasSubstr("posix/memory"), HasSubstr("sysv/memory")),
                            HasSubstr("cma/memory")))
        << info;
    EXPECT_THAT(info, Not(HasSubstr("tcp/"))) << info;
  }));
}

TEST(UcxBackend, TcpOnlyWhenUcxTlsSaysSo) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [](int rank, const std::string& store_url) {
    setenv("UCX_TLS", "tcp,self", 1);
    ConnectOptions options = testing::RankConnectOptions(rank, 2, "ucx", {});
    options.store_url = store_url;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Communicator> comm, Connect(options));
    const std::string info = BroadcastAndDescribe(rank, *comm);
    EXPECT_THAT(info, HasSubstr("tcp/")) << info;
    EXPECT_THAT(info, Not(AnyOf(HasSubstr("posix/"), HasSubstr("sysv/"), HasSubstr("cma/"))))
        << info;
  }));
}

TEST(UcxBackend, MissingTransportIsRefusedNamingWhatWasFound) {
  SHARDKIT_EXPECT_OK(ForkRanks(2, [](int rank, const std::string& store_url) {
    setenv("UCX_TLS", "rc,tcp", 1);
    ConnectOptions options = testing::RankConnectOptions(rank, 2, "ucx", {});
    options.store_url = store_url;
    EXPECT_THAT(Connect(options),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("UCX_TLS asks for rc, which this host lacks (found: self, "
                                   "tcp")));
  }));
}

// CPU time this thread has used.
absl::Duration ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

TEST(UcxBackend, WaitingRankSleeps) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "ucx", [](int rank, Communicator& comm) {
    std::vector<uint8_t> data(1 << 20, rank == 0 ? 1 : 0);
    SHARDKIT_ASSERT_OK(comm.Barrier());
    if (rank == 0) absl::SleepFor(absl::Seconds(1));  // rank 1 waits a second for its bytes
    const absl::Duration cpu = ThreadCpu();
    SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(data), 0));
    if (rank == 1) {
      EXPECT_LT(ThreadCpu() - cpu, absl::Milliseconds(200)) << "a one-second wait spun";
    }
  }));
}

// Broadcasts `bytes` at `data` from rank 0; the receivers check the last byte.
void BroadcastFrom0(int rank, Communicator& comm, std::byte* data, size_t bytes, int value) {
  if (rank == 0) std::memset(data, value, bytes);
  SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(data, bytes, Device::Cpu()), 0));
  EXPECT_EQ(data[bytes - 1], std::byte(value));
}

// Messages from and into the allocator's blocks carry the block's registration: made once, reused
// by later messages (into the same block handed out again from the cache, or into part of it),
// dropped when the allocator unmaps the block. Other memory goes without one.
TEST(UcxBackend, AllocatorBlocksAreRegisteredOnceAndReused) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "ucx", [](int rank, Communicator& comm) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(UcxContext context, SharedContext());
    Registrations& registrations = Registrations::Shared(context);
    ReleaseCpuCache();
    const Registrations::Stats before = registrations.stats();
    constexpr size_t kBytes = size_t{8} << 20;
    std::byte* first = nullptr;
    for (int round = 1; round <= 3; ++round) {  // a new Storage each round, the same block
      SHARDKIT_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Storage> storage,
                                    Storage::Allocate(Device::Cpu(), kBytes));
      if (first == nullptr) first = storage->data();
      EXPECT_EQ(storage->data(), first);
      BroadcastFrom0(rank, comm, storage->data(), kBytes, round);
      BroadcastFrom0(rank, comm, storage->data() + (1 << 20), 4 << 20, 10 + round);
    }
    const Registrations::Stats used = registrations.stats();
    EXPECT_EQ(used.registered - before.registered, 1);
    EXPECT_GE(used.reused - before.reused, 5);
    EXPECT_EQ(used.live, before.live + 1);

    std::vector<std::byte> other(kBytes);  // not the allocator's: no registration
    BroadcastFrom0(rank, comm, other.data(), kBytes, 9);
    EXPECT_EQ(registrations.stats().registered, used.registered);
    EXPECT_EQ(registrations.stats().reused, used.reused);

    ReleaseCpuCache();  // unmaps the block
    const Registrations::Stats after = registrations.stats();
    EXPECT_EQ(after.released - used.released, 1);
    EXPECT_EQ(after.live, before.live);
  }));
}

// A failed exchange withdraws the registrations its messages carried (with RDMA a peer that has
// not noticed the failure may still hold the key): unregistered once no message uses them, the
// block registered anew on its next message.
TEST(UcxBackend, FailedExchangeWithdrawsItsRegistrations) {
  SHARDKIT_EXPECT_OK(RunRanks(2, "ucx", [](int rank, Communicator& comm) {
    if (rank == 1) {  // never receives: rank 0's send of 8 MiB runs into its deadline
      absl::SleepFor(absl::Seconds(3));
      return;
    }
    SHARDKIT_ASSERT_OK_AND_ASSIGN(UcxContext context, SharedContext());
    Registrations& registrations = Registrations::Shared(context);
    ReleaseCpuCache();
    const Registrations::Stats before = registrations.stats();
    constexpr size_t kBytes = size_t{8} << 20;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Storage> storage,
                                  Storage::Allocate(Device::Cpu(), kBytes));
    const std::vector<ConstBuffer> sends = {ConstBuffer(),
                                            ConstBuffer(storage->data(), kBytes, Device::Cpu())};
    const std::vector<MutableBuffer> recvs(2);
    CallOptions soon;  // the rendezvous keeps the default timeout: it may be slow under load
    soon.timeout = absl::Milliseconds(600);
    EXPECT_THAT(internal::RawExchange(comm, sends, recvs, soon),
                StatusIs(absl::StatusCode::kDeadlineExceeded, ::testing::_));
    const Registrations::Stats failed = registrations.stats();
    EXPECT_EQ(failed.registered - before.registered, 1);
    EXPECT_EQ(failed.withdrawn - before.withdrawn, 1);
    EXPECT_EQ(failed.live, before.live);

    // The block (still mapped: the storage holds it) is registered anew on its next message.
    const ucp_mem_h held = registrations.Find(storage->data(), kBytes);
    EXPECT_NE(held, nullptr);
    EXPECT_EQ(registrations.stats().registered - failed.registered, 1);
    EXPECT_EQ(registrations.Find(storage->data() + kBytes / 2, kBytes / 2), held);
    // Withdrawn while two messages use it: out of the lookup at once, unregistered when both
    // are done.
    registrations.Withdraw({held});
    const ucp_mem_h fresh = registrations.Find(storage->data(), kBytes);
    EXPECT_NE(fresh, held);
    EXPECT_EQ(registrations.stats().live, before.live + 2);
    registrations.Done({held});
    EXPECT_EQ(registrations.stats().live, before.live + 2);
    registrations.Done({held});
    EXPECT_EQ(registrations.stats().live, before.live + 1);
    registrations.Done({fresh});
    EXPECT_EQ(registrations.stats().live, before.live + 1);
    EXPECT_EQ(registrations.stats().withdrawn - failed.withdrawn, 1);
  }));
}

TEST(UcxBackend, RankThatNeverJoinsIsNamed) {
  RankOptions options;
  options.absent = {2};
  SHARDKIT_EXPECT_OK(ForkRanks(
      3,
      [](int rank, const std::string& store_url) {
        RankOptions timing;
        timing.timeout = absl::Milliseconds(800);
        ConnectOptions connect = testing::RankConnectOptions(rank, 3, "ucx", timing);
        connect.store_url = store_url;
        EXPECT_THAT(Connect(connect), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                               HasSubstr("rank 2 never joined")));
      },
      options));
}

}  // namespace
}  // namespace shardkit::ucx_backend
