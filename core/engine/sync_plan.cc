// PlanSync: the agreement on both layouts, then the rounds and this rank's pieces
// (internal/sync_walk.h).
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_merge.h"
#include "core/engine/internal/sync_walk.h"
#include "core/engine/sync.h"
#include "specs/fingerprint.h"

namespace shardkit {
namespace {

using internal::SyncLayout;
using nlohmann::json;

constexpr size_t kMaxErrors = 8;

bool Contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

std::vector<int> OrAll(const std::vector<int>& ranks, int world_size) {
  if (!ranks.empty()) return ranks;
  std::vector<int> all(world_size);
  for (int r = 0; r < world_size; ++r) all[r] = r;
  return all;
}

// What this rank knows, for the one all-gather of the agreement.
json MyView(const Module* source, const Module* destination, const SyncGroups& groups,
            int64_t budget, const Communicator& comm) {
  json view = {{"groups", {groups.source, groups.destination}},
               {"budget", budget},
               {"has", {source != nullptr, destination != nullptr}}};
  json digests = json::array(), layouts = json::array(), problems = json::array();
  const Module* sides[2] = {source, destination};
  const std::vector<int>* members[2] = {&groups.source, &groups.destination};
  const char* names[2] = {"source", "destination"};
  for (int s = 0; s < 2; ++s) {
    if (sides[s] == nullptr) {
      digests.push_back(nullptr);
      layouts.push_back(nullptr);
      continue;
    }
    const json layout = internal::LayoutToJson(internal::LayoutOf(*sides[s]));
    digests.push_back(specs::Fingerprint(layout.dump()));
    const bool first = !members[s]->empty() && members[s]->front() == comm.rank();
    layouts.push_back(first ? layout : json(nullptr));
    for (std::string& p : internal::LocalProblems(*sides[s], names[s], comm)) {
      problems.push_back(std::move(p));
    }
  }
  view["digests"] = std::move(digests);
  view["layouts"] = std::move(layouts);
  view["problems"] = std::move(problems);
  return view;
}

// Every check of the agreement, on every rank alike. Returns the two layouts when all pass.
absl::Status Joined(std::vector<std::string> errors);

absl::StatusOr<std::pair<SyncLayout, SyncLayout>> Judge(const std::vector<json>& views,
                                                        const SyncGroups& groups) {
  std::vector<std::string> errors;
  const char* names[2] = {"source", "destination"};
  const std::vector<int>* members[2] = {&groups.source, &groups.destination};
  const int world = static_cast<int>(views.size());
  for (int r = 1; r < world; ++r) {
    if (views[r]["groups"] != views[0]["groups"] || views[r]["budget"] != views[0]["budget"]) {
      errors.push_back(absl::StrCat("rank ", r, " passed groups ", views[r]["groups"].dump(),
                                    " and memory_bytes ", views[r]["budget"].dump(),
                                    ", rank 0 passed ", views[0]["groups"].dump(), " and ",
                                    views[0]["budget"].dump()));
    }
  }
  for (int s = 0; s < 2 && errors.empty(); ++s) {
    for (std::string& e : internal::CheckGroup(*members[s], names[s], world)) {
      errors.push_back(std::move(e));
    }
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
  for (int r = 0; r < world; ++r) {
    for (int s = 0; s < 2; ++s) {
      const bool member = Contains(*members[s], r);
      const bool has = views[r]["has"][s].get<bool>();
      if (member != has) {
        errors.push_back(absl::StrCat("rank ", r, member ? " is in the " : " is not in the ",
                                      names[s], " group but passed ", has ? "a " : "no ", names[s],
                                      " module"));
      } else if (has && views[r]["digests"][s] != views[members[s]->front()]["digests"][s]) {
        errors.push_back(absl::StrCat("rank ", r, "'s ", names[s], " layout differs from rank ",
                                      members[s]->front(), "'s"));
      }
    }
    for (const json& p : views[r]["problems"]) {
      errors.push_back(absl::StrCat("rank ", r, ": ", p.get<std::string>()));
    }
  }
  if (errors.empty()) {
    SHARDKIT_ASSIGN_OR_RETURN(SyncLayout source,
                              internal::LayoutFromJson(views[groups.source[0]]["layouts"][0]));
    SHARDKIT_ASSIGN_OR_RETURN(SyncLayout destination,
                              internal::LayoutFromJson(views[groups.destination[0]]["layouts"][1]));
    return std::make_pair(std::move(source), std::move(destination));
  }
  return Joined(std::move(errors));
}

// At most kMaxErrors of `errors`, then how many more.
absl::Status Joined(std::vector<std::string> errors) {
  const size_t more = errors.size() > kMaxErrors ? errors.size() - kMaxErrors : 0;
  errors.resize(std::min(errors.size(), kMaxErrors));
  return absl::InvalidArgumentError(absl::StrCat(
      absl::StrJoin(errors, "; "), more > 0 ? absl::StrCat(" (and ", more, " more)") : ""));
}

}  // namespace

absl::StatusOr<SyncPlan> PlanSync(const Module* source, const Module* destination,
                                  const SyncGroups& groups_in, Communicator& comm,
                                  const SyncOptions& options) {
  const absl::Time start = absl::Now();
  CallOptions call = options.call;
  call.deadline = comm.Deadline(call);
  const SyncGroups groups{OrAll(groups_in.source, comm.world_size()),
                          OrAll(groups_in.destination, comm.world_size())};
  const int64_t budget = std::max(options.memory_bytes, kMinMoverMemoryBytes);
  const std::string mine = MyView(source, destination, groups, budget, comm).dump();
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(ConstBuffer(mine), call));
  std::vector<json> views;
  for (size_t r = 0; r < all.size(); ++r) {
    views.push_back(json::parse(all[r], nullptr, /*allow_exceptions=*/false));
    if (views.back().is_discarded() || !views.back().contains("layouts")) {
      return absl::InvalidArgumentError(
          absl::StrCat("PlanSync: rank ", r, " sent a malformed view (another shardkit build?)"));
    }
  }
  absl::StatusOr<std::pair<SyncLayout, SyncLayout>> layouts = Judge(views, groups);
  if (!layouts.ok()) return Annotate(layouts.status(), "PlanSync");
  const auto& [source_layout, destination_layout] = *layouts;
  internal::SyncBoxCache source_boxes(source_layout, static_cast<int>(groups.source.size()));
  internal::SyncBoxCache destination_boxes(destination_layout,
                                           static_cast<int>(groups.destination.size()));
  if (std::vector<std::string> errors = internal::CompareLayouts(source_layout, destination_layout,
                                                                 source_boxes, destination_boxes);
      !errors.empty()) {
    return Annotate(Joined(std::move(errors)), "PlanSync");
  }

  SyncPlan plan;
  internal::SyncPlanAccess::Init(
      plan,
      specs::Sha256(
          json::array({views[groups.source[0]]["layouts"][0],
                       views[groups.destination[0]]["layouts"][1], views[0]["groups"], budget})
              .dump()),
      budget);
  // Three buckets of a third of the budget: two to send (one packed while the other is on the
  // wire), one to receive.
  absl::flat_hash_map<std::string_view, const SyncLayout::Parameter*> by_name;
  for (const SyncLayout::Parameter& p : source_layout.parameters) by_name[p.name] = &p;
  std::vector<internal::MoveParameter> parameters;
  for (const SyncLayout::Parameter& d : destination_layout.parameters) {
    SHARDKIT_ASSIGN_OR_RETURN(const internal::SyncBoxes* from, source_boxes.Get(*by_name[d.name]));
    SHARDKIT_ASSIGN_OR_RETURN(const internal::SyncBoxes* to, destination_boxes.Get(d));
    parameters.push_back({d.name, from, to, d.dtype});
  }
  SHARDKIT_RETURN_IF_ERROR(
      internal::PlanMoves(parameters, groups, budget / 3, comm, call, start, plan));
  return plan;
}

}  // namespace shardkit
