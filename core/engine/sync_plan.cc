// PlanSync: the agreement on both layouts, then every rank's walk of the same piece list.
#include "core/engine/sync_plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/sync_layout.h"
#include "specs/fingerprint.h"

namespace shardkit {
namespace {

using internal::SyncLayout;
using internal::SyncParameter;
using nlohmann::json;

constexpr int64_t kMinBudget = int64_t{64} << 10;
constexpr size_t kMaxErrors = 8;
constexpr int64_t kCoalesceBelow = int64_t{64} << 10;  // SyncPiece::coalesced

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
    const json layout =
        internal::LayoutToJson(internal::LayoutOf(*sides[s], static_cast<int>(members[s]->size())));
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
    errors = internal::CompareLayouts(source, destination, static_cast<int>(groups.source.size()),
                                      static_cast<int>(groups.destination.size()));
    if (errors.empty()) return std::make_pair(std::move(source), std::move(destination));
  }
  const size_t more = errors.size() > kMaxErrors ? errors.size() - kMaxErrors : 0;
  errors.resize(std::min(errors.size(), kMaxErrors));
  return absl::InvalidArgumentError(absl::StrCat(
      absl::StrJoin(errors, "; "), more > 0 ? absl::StrCat(" (and ", more, " more)") : ""));
}

bool Strided(const specs::Box& shard, const specs::Box& box) {
  specs::ShardMetadata rel{box.offsets, box.sizes};
  for (size_t d = 0; d < box.offsets.size(); ++d) rel.offsets[d] -= shard.offsets[d];
  return !internal::RegionIsContiguous(shard.sizes, rel);
}

// The walk of the global piece list, keeping this rank's pieces and assigning rounds.
class Walker {
 public:
  Walker(int me, int world, int64_t budget)
      : me_(me), budget_(budget), send_used_(world), recv_used_(world) {}

  void Parameter(size_t parameter, const SyncParameter& source, const SyncParameter& destination,
                 const SyncGroups& groups);
  int rounds() const { return round_ + 1; }
  size_t total() const { return next_id_; }
  std::vector<SyncPiece> sends, receives;
  std::vector<int64_t> receives_per_parameter;

 private:
  void Add(SyncPiece piece, const specs::Box& source_box, const specs::Box& destination_box,
           DType dtype);
  void Assign(SyncPiece piece);

  int me_;
  int64_t budget_;
  int round_ = 0;
  size_t next_id_ = 0;
  std::vector<int64_t> send_used_, recv_used_;
};

void Walker::Parameter(size_t parameter, const SyncParameter& source,
                       const SyncParameter& destination, const SyncGroups& groups) {
  receives_per_parameter.push_back(0);
  const std::vector<specs::Box> unique =
      source.replicated ? std::vector<specs::Box>{source.boxes.front()} : source.boxes;
  const specs::ShardBoxIndex index{std::vector<specs::Box>(unique)};
  for (size_t j = 0; j < destination.boxes.size(); ++j) {
    const int to = groups.destination[destination.group_ranks[j]];
    for (const specs::BoxHit& hit : index.Intersecting(destination.boxes[j])) {
      size_t shard = hit.shard;
      if (source.replicated) {  // one holder: this rank's own copy, else spread by shard
        const auto own = std::find(groups.source.begin(), groups.source.end(), to);
        shard = own != groups.source.end() ? static_cast<size_t>(own - groups.source.begin())
                                           : j % source.boxes.size();
      }
      SyncPiece piece{.parameter = parameter,
                      .from = groups.source[source.group_ranks[shard]],
                      .to = to,
                      .box = hit.intersection,
                      .source_shard = shard,
                      .destination_shard = j};
      Add(std::move(piece), source.boxes[shard], destination.boxes[j], source.dtype);
    }
  }
}

// Splits a staged piece larger than the budget along its first dimension longer than 1 (then the
// next), recomputing for each part whether it is strided.
void Walker::Add(SyncPiece piece, const specs::Box& source_box, const specs::Box& destination_box,
                 DType dtype) {
  int64_t numel = 1;
  for (int64_t s : piece.box.sizes) numel *= s;
  piece.bytes = numel * static_cast<int64_t>(ElementSize(dtype));
  if (piece.from != piece.to) {
    piece.coalesced = piece.bytes < kCoalesceBelow;
    piece.staged_send = piece.coalesced || Strided(source_box, piece.box);
    piece.staged_recv = piece.coalesced || Strided(destination_box, piece.box);
  }
  const bool staged = piece.staged_send || piece.staged_recv;
  size_t d = 0;
  while (d < piece.box.sizes.size() && piece.box.sizes[d] <= 1) ++d;
  if (!staged || piece.bytes <= budget_ || d == piece.box.sizes.size()) {
    Assign(std::move(piece));
    return;
  }
  const int64_t per_index = piece.bytes / piece.box.sizes[d];
  const int64_t step = std::max<int64_t>(1, budget_ / std::max<int64_t>(per_index, 1));
  for (int64_t at = 0; at < piece.box.sizes[d]; at += step) {
    SyncPiece part = piece;
    part.box.offsets[d] += at;
    part.box.sizes[d] = std::min(step, piece.box.sizes[d] - at);
    Add(std::move(part), source_box, destination_box, dtype);
  }
}

void Walker::Assign(SyncPiece piece) {
  piece.id = next_id_++;
  if (piece.from != piece.to) {
    const int64_t need_send = piece.staged_send ? piece.bytes : 0;
    const int64_t need_recv = piece.staged_recv ? piece.bytes : 0;
    if (send_used_[piece.from] + need_send > budget_ ||
        recv_used_[piece.to] + need_recv > budget_) {
      ++round_;
      std::fill(send_used_.begin(), send_used_.end(), 0);
      std::fill(recv_used_.begin(), recv_used_.end(), 0);
    }
    send_used_[piece.from] += need_send;
    recv_used_[piece.to] += need_recv;
  }
  piece.round = round_;
  if (piece.to == me_) {
    ++receives_per_parameter.back();
    receives.push_back(piece);
  }
  if (piece.from == me_ && piece.to != me_) sends.push_back(std::move(piece));
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
  const int64_t budget = std::max(options.memory_bytes, kMinBudget);
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

  SyncPlan plan;
  internal::SyncPlanAccess::Init(
      plan,
      specs::Sha256(
          json::array({views[groups.source[0]]["layouts"][0],
                       views[groups.destination[0]]["layouts"][1], views[0]["groups"], budget})
              .dump()),
      budget);
  Walker walker(comm.rank(), comm.world_size(), budget / 2);  // two send buckets: sync.cc
  std::vector<std::string> names;
  absl::flat_hash_map<std::string, const SyncParameter*> by_name;
  for (const SyncParameter& p : source_layout) by_name[p.name] = &p;
  for (const SyncParameter& d : destination_layout) {
    walker.Parameter(names.size(), *by_name[d.name], d, groups);
    names.push_back(d.name);
  }
  internal::SyncPlanAccess::Finish(plan, std::move(names), walker.rounds(), walker.total(),
                                   std::move(walker.sends), std::move(walker.receives),
                                   std::move(walker.receives_per_parameter), absl::Now() - start);
  return plan;
}

}  // namespace shardkit
