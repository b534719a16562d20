#include "testing/multiprocess.h"

#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "core/store/memory_store.h"
#include "gtest/gtest.h"
#include "testing/internal/child_process.h"

namespace shardkit::testing {
namespace {

using internal::ChildGroup;

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), " s"); }

// Describes how child i ended, or "" if it succeeded.
std::string DescribeRank(ChildGroup& group, size_t i, const std::optional<std::string>& report,
                         const RankOptions& options) {
  const int rank = group.rank(i);
  const ChildGroup::Exit exit = group.Reap(i, absl::Now() + absl::Seconds(5));
  if (group.timed_out(i) || exit.killed) {
    return absl::StrCat("rank ", rank, " did not finish within ", Seconds(options.deadline));
  }
  if (exit.signal != 0) {
    if (options.may_die.count(rank)) return "";
    return absl::StrCat("rank ", rank, " was killed by signal ", exit.signal);
  }
  if (report.has_value() && !report->empty()) {
    return absl::StrCat("rank ", rank, " failed:\n", *report);
  }
  if (exit.code != 0 || !report.has_value()) {
    return absl::StrCat("rank ", rank, " exited with code ", exit.code,
                        report.has_value() ? "" : " without reporting");
  }
  return "";
}

}  // namespace

absl::Status ForkRanks(int world_size, const std::function<void(int, const std::string&)>& fn,
                       const RankOptions& options) {
  const std::string store_url = "file://" + FreshTestDir("ranks");
  const absl::Time deadline = absl::Now() + options.deadline;
  ChildGroup group;
  for (int rank = 0; rank < world_size; ++rank) {
    if (options.absent.count(rank)) continue;
    SHARDKIT_RETURN_IF_ERROR(group.Spawn(rank, [&](int /*from_parent*/, int to_parent) {
      const std::string failures = internal::CaptureFailures([&] { fn(rank, store_url); });
      return internal::WriteMessage(to_parent, failures) && failures.empty() ? 0 : 1;
    }));
  }
  const std::vector<std::optional<std::string>> reports = group.Collect(deadline);
  for (size_t i = 0; i < group.size(); ++i) {
    if (group.timed_out(i)) group.Kill(i);
  }
  std::vector<std::string> problems;
  for (size_t i = 0; i < group.size(); ++i) {
    std::string problem = DescribeRank(group, i, reports[i], options);
    if (!problem.empty()) problems.push_back(std::move(problem));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrJoin(problems, "\n"));
}

ConnectOptions RankConnectOptions(int rank, int world_size, std::string_view backend,
                                  const RankOptions& options) {
  ConnectOptions connect;
  connect.rank = rank;
  connect.local_rank = rank;  // one machine: one device per rank (NCCL)
  connect.world_size = world_size;
  connect.backend = std::string(backend);
  connect.timeout = options.timeout;
  return connect;
}

std::string TestBackend() {
  const char* backend = std::getenv("SHARDKIT_TEST_BACKEND");
  return backend != nullptr && *backend != '\0' ? backend : "gloo";
}

absl::Status RunRanks(int world_size, std::string_view backend,
                      const std::function<void(int, Communicator&)>& fn,
                      const RankOptions& options) {
  return ForkRanks(
      world_size,
      [&](int rank, const std::string& store_url) {
        ConnectOptions connect = RankConnectOptions(rank, world_size, backend, options);
        connect.store_url = store_url;
        absl::StatusOr<std::unique_ptr<Communicator>> comm = Connect(connect);
        ASSERT_TRUE(comm.ok()) << "Connect: " << comm.status();
        fn(rank, **comm);
      },
      options);
}

absl::Status RunRanksInThreads(int world_size, std::string_view backend,
                               const std::function<void(int, Communicator&)>& fn,
                               const RankOptions& options) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<absl::Status> connected(world_size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      ConnectOptions connect = RankConnectOptions(rank, world_size, backend, options);
      connect.store = store;
      absl::StatusOr<std::unique_ptr<Communicator>> comm = Connect(connect);
      connected[rank] = Annotate(comm.status(), absl::StrCat("rank ", rank));
      if (comm.ok()) fn(rank, **comm);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : connected) SHARDKIT_RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

}  // namespace shardkit::testing
