#include "core/engine/internal/sync_layout.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"

namespace shardkit::internal {
namespace {

SyncParameter Replicated(const std::string& name, const Tensor& t, int group_size) {
  SyncParameter p{.name = name, .shape = t.shape(), .dtype = t.dtype(), .replicated = true};
  for (int r = 0; r < group_size; ++r) {
    p.boxes.push_back({Shape(t.shape().size(), 0), t.shape()});
    p.group_ranks.push_back(r);
  }
  return p;
}

SyncParameter Sharded(const std::string& name, const ShardedTensor& st) {
  SyncParameter p{.name = name, .shape = st.global_shape(), .dtype = st.dtype()};
  for (const specs::ShardMetadata& shard : st.shards()) {
    p.boxes.push_back({shard.offsets, shard.sizes});
    p.group_ranks.push_back(static_cast<int>(shard.placement.rank()));
  }
  return p;
}

std::string ShapeText(const Shape& shape) { return nlohmann::json(shape).dump(); }

}  // namespace

SyncLayout LayoutOf(const Module& module, int group_size) {
  SyncLayout layout;
  for (const std::string& name : module.names()) {
    if (absl::StatusOr<const ShardedTensor*> st = module.GetSharded(name); st.ok()) {
      layout.push_back(Sharded(name, **st));
    } else if (absl::StatusOr<const Tensor*> t = module.GetTensor(name); t.ok()) {
      layout.push_back(Replicated(name, **t, group_size));
    }
  }
  return layout;
}

nlohmann::json LayoutToJson(const SyncLayout& layout) {
  nlohmann::json out = nlohmann::json::array();
  for (const SyncParameter& p : layout) {
    nlohmann::json boxes = nlohmann::json::array();
    for (size_t i = 0; i < p.boxes.size(); ++i) {
      boxes.push_back({p.boxes[i].offsets, p.boxes[i].sizes, p.group_ranks[i]});
    }
    out.push_back({p.name, DTypeName(p.dtype), p.shape, p.replicated, std::move(boxes)});
  }
  return out;
}

absl::StatusOr<SyncLayout> LayoutFromJson(const nlohmann::json& json) {
  SyncLayout layout;
  try {
    for (const nlohmann::json& item : json) {
      SyncParameter p{.name = item.at(0).get<std::string>(), .shape = item.at(2).get<Shape>()};
      SHARDKIT_ASSIGN_OR_RETURN(p.dtype, ParseDType(item.at(1).get<std::string>()));
      p.replicated = item.at(3).get<bool>();
      for (const nlohmann::json& box : item.at(4)) {
        p.boxes.push_back({box.at(0).get<Shape>(), box.at(1).get<Shape>()});
        p.group_ranks.push_back(box.at(2).get<int>());
      }
      layout.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed sync layout: ", e.what()));
  }
  return layout;
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
                                        int source_size, int destination_size) {
  std::vector<std::string> problems;
  absl::flat_hash_map<std::string, const SyncParameter*> by_name;
  for (const SyncParameter& p : source) by_name[p.name] = &p;
  for (const SyncParameter& d : destination) {
    auto it = by_name.find(d.name);
    if (it == by_name.end()) {
      problems.push_back(absl::StrCat("destination parameter ", QuoteName(d.name),
                                      " is not in the source module"));
      continue;
    }
    const SyncParameter& s = *it->second;
    if (s.shape != d.shape || s.dtype != d.dtype) {
      problems.push_back(absl::StrCat("parameter ", QuoteName(d.name), ": source is ",
                                      std::string(DTypeName(s.dtype)), ShapeText(s.shape),
                                      ", destination is ", std::string(DTypeName(d.dtype)),
                                      ShapeText(d.shape)));
    }
    by_name.erase(it);
  }
  for (const SyncParameter& s : source) {
    if (by_name.contains(s.name)) {
      problems.push_back(absl::StrCat("source parameter ", QuoteName(s.name),
                                      " is not in the destination module"));
    }
  }
  auto check_ranks = [&](const SyncLayout& layout, int size, std::string_view side) {
    for (const SyncParameter& p : layout) {
      for (int r : p.group_ranks) {
        if (r < 0 || r >= size) {
          problems.push_back(absl::StrCat(std::string(side), " parameter ", QuoteName(p.name),
                                          ": a shard is placed on group rank ", r,
                                          ", outside the group of ", size));
          break;
        }
      }
    }
  };
  check_ranks(source, source_size, "source");
  check_ranks(destination, destination_size, "destination");
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

absl::StatusOr<SyncTensor> LocalSyncTensor(const Module& module, const std::string& name,
                                           size_t shard) {
  SHARDKIT_ASSIGN_OR_RETURN(bool sharded, module.IsSharded(name));
  if (!sharded) {
    SHARDKIT_ASSIGN_OR_RETURN(const Tensor* t, module.GetTensor(name));
    return SyncTensor{*t, Shape(t->shape().size(), 0)};
  }
  SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, module.GetSharded(name));
  for (const LocalShard& local : st->local_shards()) {
    if (local.index == shard) return SyncTensor{local.tensor, st->shards()[shard].offsets};
  }
  return absl::FailedPreconditionError(
      absl::StrCat("parameter ", QuoteName(name), ": this rank does not hold shard ", shard,
                   " that the sync plan expects (a module other than the one planned with)"));
}

}  // namespace shardkit::internal
