#include "testing/rank_group.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "gtest/gtest.h"
#include "testing/internal/child_process.h"

namespace shardkit::testing {
namespace {

using internal::ReadMessage;
using internal::WriteMessage;

constexpr char kPoisoned = 'P';
constexpr char kHealthy = 'H';

// A rank's life: connect, report, then run cases until the parent closes the pipe.
int RankMain(int rank, int world_size, const std::string& backend, const std::string& store_url,
             const RankOptions& options, int from_parent, int to_parent) {
  ConnectOptions connect = RankConnectOptions(rank, world_size, backend, options);
  connect.store_url = store_url;
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Connect(connect);
  const std::string hello = comm.ok() ? "" : absl::StrCat("Connect: ", comm.status().ToString());
  if (!WriteMessage(to_parent, hello) || !comm.ok()) return 1;
  while (std::optional<std::string> command = ReadMessage(from_parent)) {
    RankGroup::CaseFn fn = nullptr;
    if (command->size() < sizeof(fn)) return 2;
    std::memcpy(&fn, command->data(), sizeof(fn));
    const std::string_view arg = std::string_view(*command).substr(sizeof(fn));
    std::string failures = internal::CaptureFailures([&] { fn(rank, **comm, arg); });
    const char state = (*comm)->poisoned().ok() ? kHealthy : kPoisoned;
    if (!WriteMessage(to_parent, state + failures)) return 3;
  }
  return 0;
}

}  // namespace

RankGroup::RankGroup(int world_size, RankOptions options)
    : world_size_(world_size),
      options_(std::move(options)),
      group_(std::make_unique<internal::ChildGroup>()) {}

RankGroup::~RankGroup() = default;

absl::StatusOr<std::unique_ptr<RankGroup>> RankGroup::Start(int world_size,
                                                            const std::string& backend,
                                                            const RankOptions& options) {
  std::unique_ptr<RankGroup> group(new RankGroup(world_size, options));
  const std::string store_url = "file://" + FreshTestDir("group");
  for (int rank = 0; rank < world_size; ++rank) {
    SHARDKIT_RETURN_IF_ERROR(group->group_->Spawn(rank, [&](int from_parent, int to_parent) {
      return RankMain(rank, world_size, backend, store_url, options, from_parent, to_parent);
    }));
  }
  std::vector<std::optional<std::string>> hellos =
      group->group_->Collect(absl::Now() + options.deadline);
  for (auto& hello : hellos) {
    if (hello.has_value()) hello = kHealthy + *hello;
  }
  SHARDKIT_RETURN_IF_ERROR(Annotate(group->Verdict(hellos), "starting the rank group"));
  return group;
}

absl::StatusOr<RankGroup*> RankGroup::Shared(int world_size, const std::string& backend,
                                             const RankOptions& options) {
  static auto* groups = new std::map<std::pair<int, std::string>, std::unique_ptr<RankGroup>>();
  std::unique_ptr<RankGroup>& group = (*groups)[{world_size, backend}];
  if (group == nullptr || !group->healthy()) {
    group.reset();  // stops the old children first
    SHARDKIT_ASSIGN_OR_RETURN(group, Start(world_size, backend, options));
  }
  return group.get();
}

absl::Status RankGroup::Run(CaseFn fn, std::string_view arg) {
  if (!healthy_) return absl::FailedPreconditionError("the rank group has stopped");
  std::string command(sizeof(fn), '\0');
  std::memcpy(command.data(), &fn, sizeof(fn));
  command.append(arg.data(), arg.size());
  group_->Broadcast(command);
  return Verdict(group_->Collect(absl::Now() + options_.deadline));
}

absl::Status RankGroup::Verdict(const std::vector<std::optional<std::string>>& replies) {
  std::vector<std::string> problems;
  bool stop = false;
  for (size_t i = 0; i < replies.size(); ++i) {
    const int rank = group_->rank(i);
    if (group_->timed_out(i)) {
      problems.push_back(absl::StrCat("rank ", rank, " did not finish within ",
                                      absl::ToDoubleSeconds(options_.deadline), " s"));
      stop = true;
    } else if (!replies[i].has_value() || replies[i]->empty()) {
      const internal::ChildGroup::Exit exit = group_->Reap(i, absl::Now() + absl::Seconds(5));
      problems.push_back(absl::StrCat("rank ", rank, " died (exit code ", exit.code, ", signal ",
                                      exit.signal, ")"));
      stop = true;
    } else {
      if ((*replies[i])[0] == kPoisoned) stop = true;
      if (replies[i]->size() > 1) {
        problems.push_back(absl::StrCat("rank ", rank, " failed:\n", replies[i]->substr(1)));
        stop = true;
      }
    }
  }
  if (stop) {
    healthy_ = false;
    group_->KillAll();
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrJoin(problems, "\n"));
}

}  // namespace shardkit::testing
