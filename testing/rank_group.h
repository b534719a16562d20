// RankGroup: one forked group of connected ranks that runs many test cases, so that a test
// binary pays the rendezvous once per world size instead of once per case.
//
//   void BroadcastCase(int rank, Communicator& comm, std::string_view arg) {
//     std::vector<uint8_t> v(arg.size());
//     if (rank == 0) std::copy(arg.begin(), arg.end(), v.begin());
//     SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(v), 0));
//   }
//   TEST(Gloo, ManyBroadcasts) {
//     SHARDKIT_ASSERT_OK_AND_ASSIGN(RankGroup* group, RankGroup::Shared(4, "gloo"));
//     SHARDKIT_EXPECT_OK(group->Run(&BroadcastCase, "hello"));
//   }
//
// Cases are plain function pointers plus an argument string: the children are forked before the
// case exists, and a function pointer means the same code in a forked child. Each case's gtest
// failures come back with the rank, as with RunRanks. A case that fails, hangs past the
// deadline (the rank is named and killed) or poisons a communicator stops the group; Shared()
// starts a fresh one for the next case. Children die with the test process and are reaped.
#ifndef SHARDKIT_TESTING_RANK_GROUP_H_
#define SHARDKIT_TESTING_RANK_GROUP_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "testing/multiprocess.h"

namespace shardkit::testing {
namespace internal {
class ChildGroup;
}  // namespace internal

class RankGroup {
 public:
  using CaseFn = void (*)(int rank, Communicator& comm, std::string_view arg);

  // Forks `world_size` ranks and connects them to `backend`.
  // Errors: kInternal naming the ranks that could not connect or did not start in time.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RankGroup>> Start(
      int world_size, const std::string& backend, const RankOptions& options = {});

  // The binary-wide group for (world_size, backend), started or restarted as needed.
  [[nodiscard]] static absl::StatusOr<RankGroup*> Shared(int world_size, const std::string& backend,
                                                         const RankOptions& options = {});

  // Runs fn(rank, comm, arg) on every rank within options.deadline.
  // Errors: kInternal naming every failed, late or dead rank (the group then stops).
  [[nodiscard]] absl::Status Run(CaseFn fn, std::string_view arg = "");

  ~RankGroup();

  bool healthy() const { return healthy_; }
  int world_size() const { return world_size_; }

 private:
  RankGroup(int world_size, RankOptions options);

  // Turns the ranks' replies into a Status; marks the group unhealthy on any problem.
  absl::Status Verdict(const std::vector<std::optional<std::string>>& replies);

  const int world_size_;
  const RankOptions options_;
  const std::unique_ptr<internal::ChildGroup> group_;  // the forked ranks
  bool healthy_ = true;
};

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_RANK_GROUP_H_
