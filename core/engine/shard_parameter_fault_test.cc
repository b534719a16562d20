// Faults during ShardParameter of a 64 MiB parameter on 4 and on 16 forked ranks over real Gloo
// (at 16 most ranks are not connected to the victim: they learn of it through their
// agreement-tree neighbours and the causes their "gave up" markers carry): a rank
// SIGKILLed before, during and after the transfer, a rank stalled (SIGSTOP) past the deadline, a
// rank whose TCP connections are shut down, a rank with a corrupt spec. Every rank that lives
// returns an error within the operation's deadline + 2 s (a stalled victim, within 2 s of
// resuming), and when the victim dies, within 1 s of the later of its death and the last rank's
// call, the module is unchanged on every rank, and no process is left behind. Each rank prints
// its times (see the test log).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "core/engine/shard_parameter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "specs/spec_json.h"
#include "testing/faults.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::ChildProcesses;
using ::shardkit::testing::RankOptions;
using ::shardkit::testing::RunRanks;
using ::shardkit::testing::SharedTime;
using ::shardkit::testing::StallFor;
using ::shardkit::testing::WriteTrigger;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kSource = 0;
constexpr int64_t kRows = 4096, kCols = 4096;  // float32: 64 MiB
constexpr int64_t kMiB = int64_t{1} << 20;

// What the source sends of "w": all row blocks but its own.
int64_t ScatterBytes(int world) { return 64 * kMiB / world * (world - 1); }
constexpr absl::Duration kDeadline = absl::Seconds(2);
// A victim that dies does so late in a transfer, which under ASan on a loaded machine can take
// over 1 s: its operation gets more time, so that the death always comes first.
constexpr absl::Duration kKillDeadline = absl::Seconds(5);
constexpr absl::Duration kSlack = absl::Seconds(2);
// Survivors fail this soon after a death (and the last rank's call), long before any deadline.
constexpr absl::Duration kNoticeDeath = absl::Seconds(1);

// Kills this rank, first stamping the moment in `acted` (shared by every rank).
void Die(SharedTime* acted) {
  acted->Stamp();
  raise(SIGKILL);
}

// Arms a victim to Die once it has written `bytes`.
auto DieAfterWriting(int64_t bytes) {
  return [bytes](SharedTime* acted) {
    return std::make_unique<WriteTrigger>(bytes, [acted] { Die(acted); });
  };
}

// What a case does to its victim rank; `arm` runs on the victim just before the operation and
// returns a trigger (or nullptr) that lives as long as the operation. The trigger stamps `acted`
// when the victim dies, or when a stalled victim resumes.
struct Fault {
  const char* name;
  int victim;
  std::function<std::unique_ptr<WriteTrigger>(SharedTime* acted)> arm;
  absl::Duration deadline = kDeadline;  // the operation's
  bool victim_survives = false;         // stalled or disconnected: it must fail in time too
  bool victim_stalls = false;           // stopped past the deadline: it fails once it resumes
  bool corrupt_spec = false;            // the victim passes a different spec instead
  bool with_tail = false;  // a second (16 MiB) parameter follows "w" in the same operation
  // The victim dies: the others see it go on the control mesh and fail long before the deadline
  // (kNoticeDeath after the death, however long the work before took), saying so, whether they
  // were agreeing or waiting for payload.
  bool victim_dies = false;
};

specs::ShardingSpec RowSpec(bool corrupt, int world) {
  // The corrupt spec lists the same ranks in another order: valid alone, but not what the others
  // agreed to.
  if (!corrupt)
    return *specs::ParseSpec(R"({"type":"chunk","dim":0,"placements":{"ranks":"all"}})");
  std::string placements;
  for (int r = world - 1; r >= 0; --r) {
    placements += absl::StrFormat("%s\"rank:%d\"", r == world - 1 ? "" : ",", r);
  }
  return *specs::ParseSpec(
      absl::StrFormat(R"({"type":"chunk","dim":0,"placements":[%s]})", placements));
}

// The source holds real data, the others meta tensors: a failed operation must leave both alike.
Module MakeModule(int rank, bool with_tail) {
  Module module;
  auto add = [&](const char* name, Shape shape) {
    Tensor tensor = rank == kSource ? *Tensor::Empty(shape, DType::kFloat32)
                                    : *Tensor::Meta(shape, DType::kFloat32);
    if (rank == kSource) std::memset(tensor.data(), rank + 1, tensor.nbytes());
    EXPECT_TRUE(module.AddParameter(name, std::move(tensor)).ok());
  };
  add("w", {kRows, kCols});
  if (with_tail) add("tail", {kRows / 4, kCols});
  return module;
}

void ExpectUnchanged(const Module& module, const char* name, const std::byte* data) {
  ASSERT_FALSE(*module.IsSharded(name)) << name << " was replaced";
  const Tensor* tensor = *module.GetTensor(name);
  EXPECT_EQ(tensor->data(), data) << name << " holds another tensor";
}

// Checks the status of `rank`'s operation, called at `start`, returned at `end`. `acted`: when the
// victim died or resumed, if it has yet; `last_start`: when the last rank (so far) called.
void CheckFailure(const Fault& fault, int rank, const absl::Status& status, absl::Time start,
                  absl::Time end, std::optional<absl::Time> acted, absl::Time last_start) {
  const absl::Duration elapsed = end - start;
  // From the later of the death and the last rank's call: a rank cannot hear of the death before
  // (the source takes a while to fill its 64 MiB, and news travels through peers that called).
  const absl::Duration after_death =
      acted ? end - std::max(*acted, last_start) : absl::InfiniteDuration();
  std::fprintf(stderr, "[%s] rank %d: error after %.3f s%s: %s\n", fault.name, rank,
               absl::ToDoubleSeconds(elapsed),
               fault.victim_dies && acted
                   ? absl::StrFormat(" (%.3f s after the death and the last call)",
                                     absl::ToDoubleSeconds(after_death))
                         .c_str()
                   : "",
               status.ToString().c_str());
  EXPECT_FALSE(status.ok());
  if (fault.victim_stalls && rank == fault.victim) {
    // Stopped past its deadline, it fails as soon as it resumes.
    ASSERT_TRUE(acted.has_value()) << "returned before it resumed: " << status;
    EXPECT_LT(end - *acted, kSlack) << status;
  } else {
    EXPECT_LT(elapsed, fault.deadline + kSlack) << status;
  }
  if (fault.corrupt_spec) {
    EXPECT_THAT(status, ::shardkit::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                                      HasSubstr("rank 3 differs")));
  } else {
    EXPECT_THAT(status.code(),
                AnyOf(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kUnavailable));
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrFormat("into an operation with a %.3f s deadline",
                                          absl::ToDoubleSeconds(fault.deadline))));
  }
  if (fault.victim_dies) {
    ASSERT_TRUE(acted.has_value()) << "failed before the victim died: " << status;
    EXPECT_LT(after_death, kNoticeDeath) << "noticed the death late: " << status;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("rank ", fault.victim, " went away")));
  }
}

void RunFaultCase(int world, const Fault& fault) {
  RankOptions options;
  options.timeout = absl::Seconds(10);  // rendezvous and default per call; the operation's is less
  options.deadline = absl::Seconds(30);
  options.may_die = {fault.victim};
  SharedTime acted, last_start;
  SHARDKIT_EXPECT_OK(RunRanks(
      world, "gloo",
      [&fault, &acted, &last_start, world](int rank, Communicator& comm) {
        // Every rank is connected before any fault (a rank killed during the rendezvous would
        // fail a peer's Connect instead, which gloo_fault_test covers).
        SHARDKIT_ASSERT_OK(comm.Barrier());
        Module module = MakeModule(rank, fault.with_tail);
        const std::byte* w_data = (*module.GetTensor("w"))->data();
        const bool is_victim = rank == fault.victim;
        std::vector<ParameterSpec> parameters = {
            {"w", RowSpec(is_victim && fault.corrupt_spec, world)}};
        if (fault.with_tail) parameters.push_back({"tail", std::nullopt});
        ShardOptions options;
        options.call.timeout = fault.deadline;
        last_start.Stamp();
        const absl::Time start = absl::Now();
        absl::Status status;
        {
          std::unique_ptr<WriteTrigger> trigger =
              is_victim && fault.arm ? fault.arm(&acted) : nullptr;
          status = ShardParameters(module, parameters, comm, options);
        }
        const absl::Time end = absl::Now();
        ASSERT_TRUE(!is_victim || fault.victim_survives || fault.corrupt_spec)
            << "the victim outlived its fault";
        CheckFailure(fault, rank, status, start, end, acted.Get(), *last_start.Get());
        ExpectUnchanged(module, "w", w_data);
      },
      options));
  EXPECT_THAT(ChildProcesses(getpid()), IsEmpty()) << "processes left behind";
}

class ShardParameterFaults : public ::testing::TestWithParam<int> {};

TEST_P(ShardParameterFaults, KillBeforeTransfer) {
  RunFaultCase(GetParam(), {.name = "kill-before",
                            .victim = 3,
                            .arm =
                                [](SharedTime* acted) {
                                  Die(acted);
                                  return nullptr;
                                },
                            .deadline = kKillDeadline,
                            .victim_dies = true});
}

TEST_P(ShardParameterFaults, KillSourceDuringTransfer) {
  const int64_t bytes = ScatterBytes(GetParam()) / 3;
  RunFaultCase(GetParam(), {.name = "kill-during",
                            .victim = kSource,
                            .arm = DieAfterWriting(bytes),
                            .deadline = kKillDeadline,
                            .victim_dies = true});
}

TEST_P(ShardParameterFaults, KillSourceAfterTransfer) {
  // "w" has fully left the source when it dies, early in the replicated tail's broadcast
  // ((world - 1) x 16 MiB): every rank holds its part of "w", yet nothing was committed.
  const int64_t bytes = ScatterBytes(GetParam()) + 16 * kMiB;
  RunFaultCase(GetParam(), {.name = "kill-after",
                            .victim = kSource,
                            .arm = DieAfterWriting(bytes),
                            .deadline = kKillDeadline,
                            .with_tail = true,
                            .victim_dies = true});
}

TEST_P(ShardParameterFaults, StallSourcePastDeadline) {
  const int64_t bytes = ScatterBytes(GetParam()) / 3;
  RunFaultCase(GetParam(), {.name = "stall",
                            .victim = kSource,
                            .arm =
                                [bytes](SharedTime* acted) {
                                  return std::make_unique<WriteTrigger>(bytes, [acted] {
                                    StallFor(kDeadline + absl::Seconds(1));
                                    acted->Stamp();
                                  });
                                },
                            .victim_survives = true,
                            .victim_stalls = true});
}

TEST_P(ShardParameterFaults, SourceConnectionsClosed) {
  const int64_t bytes = ScatterBytes(GetParam()) / 3;
  RunFaultCase(GetParam(), {.name = "close-sockets",
                            .victim = kSource,
                            .arm =
                                [bytes](SharedTime*) {
                                  return std::make_unique<WriteTrigger>(bytes, [] {
                                    EXPECT_GT(::shardkit::testing::ShutdownTcpConnections(), 0);
                                  });
                                },
                            .victim_survives = true});
}

TEST_P(ShardParameterFaults, CorruptSpecOnOneRank) {
  RunFaultCase(GetParam(), {.name = "corrupt-spec", .victim = 3, .corrupt_spec = true});
}

INSTANTIATE_TEST_SUITE_P(Worlds, ShardParameterFaults, ::testing::Values(4, 16),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrFormat("World%d", info.param);
                         });

}  // namespace
}  // namespace shardkit
