#include "specs/shard_metadata.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>

#include "absl/strings/str_cat.h"

namespace shardkit::specs {
namespace {

bool HasPositiveVolume(const ShardMetadata& shard) {
  return std::all_of(shard.sizes.begin(), shard.sizes.end(), [](int64_t s) { return s > 0; });
}

// [lo, hi) of `shard` in `dim`; a 0-d shard is the unit interval in every dim.
std::pair<int64_t, int64_t> Interval(const ShardMetadata& shard, size_t dim) {
  if (dim >= shard.offsets.size()) return {0, 1};
  const int64_t lo = shard.offsets[dim];
  const int64_t size = shard.sizes[dim];
  // Saturate: out-of-range shards may reach here through the public FindOverlap/Overlaps.
  const int64_t hi = size > std::numeric_limits<int64_t>::max() - lo
                         ? std::numeric_limits<int64_t>::max()
                         : lo + size;
  return {lo, hi};
}

bool OverlapFromDim(const ShardMetadata& a, const ShardMetadata& b, size_t first_dim) {
  for (size_t d = first_dim; d < a.offsets.size(); ++d) {
    auto [alo, ahi] = Interval(a, d);
    auto [blo, bhi] = Interval(b, d);
    if (alo >= bhi || blo >= ahi) return false;
  }
  return true;
}

// Sweep over dim 0. Every shard in `active` contains the current sweep position in dim 0, so the
// active shards' projections onto the remaining dims are pairwise disjoint (or an overlap was
// already found). For shards of at most 2 dims those projections are intervals, kept in a map
// ordered by their start: one lookup finds any overlap.
class OverlapSweep {
 public:
  explicit OverlapSweep(const std::vector<ShardMetadata>& shards)
      : shards_(shards), by_interval_(shards.empty() || shards[0].offsets.size() <= 2) {}

  std::optional<std::pair<size_t, size_t>> Run() {
    std::vector<size_t> order;
    for (size_t i = 0; i < shards_.size(); ++i) {
      if (HasPositiveVolume(shards_[i])) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return Interval(shards_[a], 0).first < Interval(shards_[b], 0).first;
    });
    for (size_t index : order) {
      Expire(Interval(shards_[index], 0).first);
      if (std::optional<size_t> other = FindActiveOverlap(index); other.has_value()) {
        return std::make_pair(std::min(index, *other), std::max(index, *other));
      }
      Activate(index);
    }
    return std::nullopt;
  }

 private:
  using Expiry = std::pair<int64_t, size_t>;  // (end in dim 0, shard index)

  void Expire(int64_t position) {
    while (!expiry_.empty() && expiry_.top().first <= position) {
      const size_t index = expiry_.top().second;
      expiry_.pop();
      active_.erase(index);
      if (by_interval_) intervals_.erase(Interval(shards_[index], 1).first);
    }
  }

  std::optional<size_t> FindActiveOverlap(size_t index) const {
    const ShardMetadata& shard = shards_[index];
    if (!by_interval_) {
      for (size_t other : active_) {
        if (OverlapFromDim(shard, shards_[other], 1)) return other;
      }
      return std::nullopt;
    }
    auto [lo, hi] = Interval(shard, 1);
    auto next = intervals_.lower_bound(lo);
    if (next != intervals_.end() && next->first < hi) return next->second.second;
    if (next != intervals_.begin()) {
      auto prev = std::prev(next);
      if (prev->second.first > lo) return prev->second.second;
    }
    return std::nullopt;
  }

  void Activate(size_t index) {
    active_.insert(index);
    expiry_.push({Interval(shards_[index], 0).second, index});
    if (by_interval_) {
      auto [lo, hi] = Interval(shards_[index], 1);
      intervals_[lo] = {hi, index};
    }
  }

  const std::vector<ShardMetadata>& shards_;
  const bool by_interval_;
  std::set<size_t> active_;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiry_;
  std::map<int64_t, std::pair<int64_t, size_t>> intervals_;  // start -> (end, shard index)
};

std::string Describe(const std::vector<ShardMetadata>& shards, size_t index) {
  return absl::StrCat(index, " (", ShardToString(shards[index]), ")");
}

absl::Status CheckShape(const std::vector<ShardMetadata>& shards, const Shape& global_shape) {
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardMetadata& shard = shards[i];
    if (absl::Status s = ValidateShardMetadata(shard); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", i, ": ", s.message()));
    }
    if (shard.offsets.size() != global_shape.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", Describe(shards, i), " has ", shard.offsets.size(),
                       " dims, but the tensor has ", global_shape.size(), " (shape ",
                       ShapeToString(global_shape), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInRange(const std::vector<ShardMetadata>& shards, const Shape& global_shape) {
  for (size_t i = 0; i < shards.size(); ++i) {
    for (size_t d = 0; d < global_shape.size(); ++d) {
      const int64_t offset = shards[i].offsets[d];
      const int64_t size = shards[i].sizes[d];
      if (offset > global_shape[d] || size > global_shape[d] - offset) {
        return absl::InvalidArgumentError(
            absl::StrCat("shard ", Describe(shards, i), " lies outside the tensor in dim ", d,
                         ": offset ", offset, " + size ", size, " > ", global_shape[d], " (shape ",
                         ShapeToString(global_shape), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCoverage(const std::vector<ShardMetadata>& shards, const Shape& global_shape) {
  // In range and non-overlapping: the sum is at most the tensor's volume, so it cannot overflow.
  int64_t total = 0;
  for (const ShardMetadata& shard : shards) {
    int64_t volume = 1;
    for (int64_t size : shard.sizes) volume *= size;
    total += volume;
  }
  int64_t expected = 1;
  for (int64_t size : global_shape) expected *= size;
  if (total != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shards do not cover the tensor: their volumes add up to ", total,
        ", the tensor's volume is ", expected, " (shape ", ShapeToString(global_shape), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShardToString(const ShardMetadata& shard) {
  return absl::StrCat("offsets ", ShapeToString(shard.offsets), ", sizes ",
                      ShapeToString(shard.sizes), ", ", shard.placement.ToString());
}

absl::Status ValidateShardMetadata(const ShardMetadata& shard) {
  if (shard.offsets.size() != shard.sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("offsets and sizes must have the same number of elements, found ",
                     shard.offsets.size(), " (offsets ", ShapeToString(shard.offsets), ") and ",
                     shard.sizes.size(), " (sizes ", ShapeToString(shard.sizes), ")"));
  }
  for (size_t d = 0; d < shard.offsets.size(); ++d) {
    if (shard.offsets[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("offsets must be >= 0, found offsets ", ShapeToString(shard.offsets)));
    }
    if (shard.sizes[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sizes must be >= 0, found sizes ", ShapeToString(shard.sizes)));
    }
  }
  return absl::OkStatus();
}

bool Overlaps(const ShardMetadata& a, const ShardMetadata& b) {
  if (!HasPositiveVolume(a) || !HasPositiveVolume(b)) return false;
  return OverlapFromDim(a, b, 0);
}

std::optional<std::pair<size_t, size_t>> FindOverlap(const std::vector<ShardMetadata>& shards) {
  return OverlapSweep(shards).Run();
}

absl::Status CheckNoOverlap(const std::vector<ShardMetadata>& shards) {
  if (std::optional<std::pair<size_t, size_t>> pair = FindOverlap(shards); pair.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("shards ", Describe(shards, pair->first),
                                                   " and ", Describe(shards, pair->second),
                                                   " overlap"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTiling(const std::vector<ShardMetadata>& shards, const Shape& global_shape) {
  if (shards.empty()) return absl::InvalidArgumentError("there are no shards");
  if (absl::Status s = CheckShape(shards, global_shape); !s.ok()) return s;
  if (absl::Status s = CheckInRange(shards, global_shape); !s.ok()) return s;
  if (absl::Status s = CheckNoOverlap(shards); !s.ok()) return s;
  return CheckCoverage(shards, global_shape);
}

}  // namespace shardkit::specs
