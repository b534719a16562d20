#include "core/engine/internal/sync_layout.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "specs/layout.h"
#include "specs/spec_json.h"

namespace shardkit::internal {
namespace {

std::string ShapeText(const Shape& shape) { return nlohmann::json(shape).dump(); }

// The index of `spec`'s canonical JSON in `layout.specs`, added if new. Consecutive parameters
// usually share a spec: the last few are compared first, structurally (cheap), before any JSON
// is written.
int SpecIndex(SyncLayout& layout, std::vector<std::pair<specs::ShardingSpec, int>>& recent,
              const specs::ShardingSpec& spec) {
  for (const auto& [known, index] : recent) {
    if (known == spec) return index;
  }
  std::string json = specs::CanonicalJson(spec);
  int index = -1;
  for (size_t i = 0; i < layout.specs.size() && index < 0; ++i) {
    if (layout.specs[i] == json) index = static_cast<int>(i);
  }
  if (index < 0) {
    index = static_cast<int>(layout.specs.size());
    layout.specs.push_back(std::move(json));
  }
  if (recent.size() == 4) recent.erase(recent.begin());
  recent.emplace_back(spec, index);
  return index;
}

}  // namespace

SyncLayout LayoutOf(const Module& module) {
  SyncLayout layout;
  std::vector<std::pair<specs::ShardingSpec, int>> recent;
  for (const std::string& name : module.names()) {
    if (absl::StatusOr<const ShardedTensor*> st = module.GetSharded(name); st.ok()) {
      layout.parameters.push_back(
          {name, (*st)->dtype(), (*st)->global_shape(), SpecIndex(layout, recent, (*st)->spec())});
    } else if (absl::StatusOr<const Tensor*> t = module.GetTensor(name); t.ok()) {
      layout.parameters.push_back({name, (*t)->dtype(), (*t)->shape(), -1});
    }
  }
  return layout;
}

nlohmann::json LayoutToJson(const SyncLayout& layout) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const SyncLayout::Parameter& p : layout.parameters) {
    parameters.push_back({p.name, DTypeName(p.dtype), p.shape, p.spec});
  }
  return {{"specs", layout.specs}, {"parameters", std::move(parameters)}};
}

absl::StatusOr<SyncLayout> LayoutFromJson(const nlohmann::json& json) {
  SyncLayout layout;
  try {
    layout.specs = json.at("specs").get<std::vector<std::string>>();
    for (const nlohmann::json& item : json.at("parameters")) {
      SyncLayout::Parameter p{.name = item.at(0).get<std::string>(),
                              .shape = item.at(2).get<Shape>(),
                              .spec = item.at(3).get<int>()};
      SHARDKIT_ASSIGN_OR_RETURN(p.dtype, ParseDType(item.at(1).get<std::string>()));
      if (p.spec < -1 || p.spec >= static_cast<int>(layout.specs.size())) {
        return absl::InvalidArgumentError("malformed sync layout: spec index out of range");
      }
      layout.parameters.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed sync layout: ", e.what()));
  }
  return layout;
}

absl::StatusOr<const SyncBoxes*> SyncBoxCache::Get(const SyncLayout::Parameter& p) {
  std::unique_ptr<SyncBoxes>& slot = cache_[{p.spec, p.shape}];
  if (slot != nullptr) return slot.get();
  auto boxes = std::make_unique<SyncBoxes>();
  boxes->by_rank.resize(group_size_);
  if (p.spec < 0) {
    boxes->replicated = true;
    for (int r = 0; r < group_size_; ++r) {
      boxes->boxes.push_back({Shape(p.shape.size(), 0), p.shape});
      boxes->group_ranks.push_back(r);
      boxes->by_rank[r].push_back(r);
    }
    boxes->index = specs::ShardBoxIndex({boxes->boxes.front()});
  } else {
    absl::StatusOr<specs::ShardingSpec> spec = specs::ParseSpec(layout_.specs[p.spec]);
    absl::StatusOr<std::vector<specs::ShardMetadata>> shards =
        spec.ok() ? specs::BuildMetadata(*spec, p.shape)
                  : absl::StatusOr<std::vector<specs::ShardMetadata>>(spec.status());
    absl::StatusOr<SyncBoxes> built =
        shards.ok() ? BoxesOf(*shards, group_size_) : absl::StatusOr<SyncBoxes>(shards.status());
    if (!built.ok()) return Annotate(built.status(), absl::StrCat("parameter ", QuoteName(p.name)));
    *boxes = *std::move(built);
  }
  slot = std::move(boxes);
  return slot.get();
}

absl::StatusOr<SyncBoxes> BoxesOf(const std::vector<specs::ShardMetadata>& shards, int group_size) {
  SyncBoxes boxes;
  boxes.by_rank.resize(group_size);
  for (size_t i = 0; i < shards.size(); ++i) {
    const specs::ShardMetadata& shard = shards[i];
    const int64_t rank = shard.placement.rank();
    if (rank < 0 || rank >= group_size) {
      return absl::InvalidArgumentError(absl::StrCat("a shard is placed on group rank ", rank,
                                                     ", outside the group of ", group_size));
    }
    boxes.boxes.push_back({shard.offsets, shard.sizes});
    boxes.group_ranks.push_back(static_cast<int>(rank));
    boxes.by_rank[rank].push_back(i);
  }
  boxes.index = specs::ShardBoxIndex(std::vector<specs::Box>(boxes.boxes));
  return boxes;
}

std::vector<std::string> LocalProblems(const Module& module, std::string_view side,
                                       const Communicator& comm) {
  std::vector<std::string> problems;
  auto check = [&](const std::string& name, const Tensor& t) {
    std::string what;
    if (t.is_meta()) {
      what = "is a meta tensor (no memory to sync)";
    } else if (!t.IsContiguous()) {
      what = "is not contiguous";
    } else if (!comm.SupportsDevice(t.device())) {
      what = absl::StrCat("is on ", t.device().ToString(), ", which this backend cannot move");
    }
    if (!what.empty()) {
      problems.push_back(absl::StrCat(std::string(side), " parameter ", QuoteName(name), ": ",
                                      t.DebugString(), " ", what));
    }
  };
  for (const std::string& name : module.names()) {
    if (absl::StatusOr<const ShardedTensor*> st = module.GetSharded(name); st.ok()) {
      for (const LocalShard& shard : (*st)->local_shards()) check(name, shard.tensor);
    } else if (absl::StatusOr<const Tensor*> t = module.GetTensor(name); t.ok()) {
      check(name, **t);
    }
  }
  return problems;
}

std::vector<std::string> CompareLayouts(const SyncLayout& source, const SyncLayout& destination,
                                        SyncBoxCache& source_boxes,
                                        SyncBoxCache& destination_boxes) {
  std::vector<std::string> problems;
  absl::flat_hash_map<std::string, const SyncLayout::Parameter*> by_name;
  for (const SyncLayout::Parameter& p : source.parameters) by_name[p.name] = &p;
  for (const SyncLayout::Parameter& d : destination.parameters) {
    auto it = by_name.find(d.name);
    if (it == by_name.end()) {
      problems.push_back(absl::StrCat("destination parameter ", QuoteName(d.name),
                                      " is not in the source module"));
      continue;
    }
    const SyncLayout::Parameter& s = *it->second;
    if (s.shape != d.shape || s.dtype != d.dtype) {
      problems.push_back(absl::StrCat("parameter ", QuoteName(d.name), ": source is ",
                                      std::string(DTypeName(s.dtype)), ShapeText(s.shape),
                                      ", destination is ", std::string(DTypeName(d.dtype)),
                                      ShapeText(d.shape)));
    }
    by_name.erase(it);
    for (auto [cache, side, p] : {std::tuple(&source_boxes, "source ", &s),
                                  std::tuple(&destination_boxes, "destination ", &d)}) {
      if (absl::StatusOr<const SyncBoxes*> boxes = cache->Get(*p); !boxes.ok()) {
        problems.push_back(absl::StrCat(side, boxes.status().message()));
      }
    }
  }
  for (const SyncLayout::Parameter& s : source.parameters) {
    if (by_name.contains(s.name)) {
      problems.push_back(absl::StrCat("source parameter ", QuoteName(s.name),
                                      " is not in the destination module"));
    }
  }
  return problems;
}

std::vector<std::string> CheckGroup(const std::vector<int>& ranks, std::string_view side,
                                    int world_size) {
  if (ranks.empty()) return {absl::StrCat("the ", std::string(side), " group is empty")};
  std::vector<bool> seen(world_size);
  for (int r : ranks) {
    if (r < 0 || r >= world_size) {
      return {absl::StrCat("the ", std::string(side), " group names rank ", r,
                           ", outside the world of ", world_size)};
    }
    if (seen[r])
      return {absl::StrCat("the ", std::string(side), " group names rank ", r, " twice")};
    seen[r] = true;
  }
  return {};
}

}  // namespace shardkit::internal
