#include "specs/shard_box_index.h"

#include <algorithm>
#include <utility>

#include "core/base/check.h"

namespace shardkit::specs {

ShardBoxIndex::ShardBoxIndex(std::vector<Box> boxes) : boxes_(std::move(boxes)) {
  rank_ = boxes_.empty() ? 0 : boxes_[0].offsets.size();
  dims_.resize(rank_);
  empty_.assign(boxes_.size(), false);
  for (size_t s = 0; s < boxes_.size(); ++s) {
    const Box& box = boxes_[s];
    SHARDKIT_CHECK(box.offsets.size() == rank_ && box.sizes.size() == rank_);
    for (size_t d = 0; d < rank_; ++d) {
      SHARDKIT_CHECK(box.offsets[d] >= 0 && box.sizes[d] >= 0);
      if (box.sizes[d] == 0) empty_[s] = true;
    }
  }
  for (size_t d = 0; d < rank_; ++d) {
    Dim& dim = dims_[d];
    for (size_t s = 0; s < boxes_.size(); ++s) {
      if (empty_[s]) continue;
      dim.by_begin.push_back({boxes_[s].offsets[d], boxes_[s].offsets[d] + boxes_[s].sizes[d], s});
    }
    std::stable_sort(dim.by_begin.begin(), dim.by_begin.end(),
                     [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
    int64_t most = 0;
    for (const Interval& interval : dim.by_begin) {
      dim.max_end.push_back(most = std::max(most, interval.end));
    }
  }
}

ShardBoxIndex ShardBoxIndex::FromShards(const std::vector<ShardMetadata>& shards) {
  std::vector<Box> boxes;
  boxes.reserve(shards.size());
  for (const ShardMetadata& shard : shards) boxes.push_back({shard.offsets, shard.sizes});
  return ShardBoxIndex(std::move(boxes));
}

// Candidates: intervals that start before `end`, from the first whose running maximum of ends
// passes `begin` (both ascending).
std::pair<size_t, size_t> ShardBoxIndex::Candidates(size_t d, int64_t begin, int64_t end) const {
  const Dim& dim = dims_[d];
  const auto first = static_cast<size_t>(
      std::upper_bound(dim.max_end.begin(), dim.max_end.end(), begin) - dim.max_end.begin());
  const auto last = static_cast<size_t>(
      std::lower_bound(dim.by_begin.begin(), dim.by_begin.end(), end,
                       [](const Interval& interval, int64_t at) { return interval.begin < at; }) -
      dim.by_begin.begin());
  return {first, std::max(first, last)};
}

std::vector<size_t> ShardBoxIndex::IntersectingInDim(size_t d, int64_t begin, int64_t end) const {
  SHARDKIT_CHECK(d < rank_);
  std::vector<size_t> out;
  if (begin >= end) return out;
  const auto [first, last] = Candidates(d, begin, end);
  for (size_t i = first; i < last; ++i) {
    if (dims_[d].by_begin[i].end > begin) out.push_back(dims_[d].by_begin[i].shard);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<BoxHit> ShardBoxIndex::Intersecting(const Box& box) const {
  std::vector<BoxHit> hits;
  if (box.offsets.size() != rank_ || box.sizes.size() != rank_) return hits;
  if (rank_ == 0) {
    for (size_t s = 0; s < boxes_.size(); ++s) hits.push_back({s, Box{}});
    return hits;
  }
  for (size_t d = 0; d < rank_; ++d) {
    if (box.sizes[d] <= 0) return hits;
  }
  // Walk the dimension with the fewest candidates.
  size_t best = 0;
  std::pair<size_t, size_t> range = Candidates(0, box.offsets[0], box.offsets[0] + box.sizes[0]);
  for (size_t d = 1; d < rank_; ++d) {
    const auto r = Candidates(d, box.offsets[d], box.offsets[d] + box.sizes[d]);
    if (r.second - r.first < range.second - range.first) best = d, range = r;
  }
  for (size_t i = range.first; i < range.second; ++i) {
    const size_t s = dims_[best].by_begin[i].shard;
    const Box& shard = boxes_[s];
    BoxHit hit{s, Box{Shape(rank_), Shape(rank_)}};
    bool meets = true;
    for (size_t d = 0; d < rank_ && meets; ++d) {
      const int64_t begin = std::max(shard.offsets[d], box.offsets[d]);
      const int64_t end =
          std::min(shard.offsets[d] + shard.sizes[d], box.offsets[d] + box.sizes[d]);
      meets = begin < end;
      hit.intersection.offsets[d] = begin;
      hit.intersection.sizes[d] = end - begin;
    }
    if (meets) hits.push_back(std::move(hit));
  }
  std::sort(hits.begin(), hits.end(),
            [](const BoxHit& a, const BoxHit& b) { return a.shard < b.shard; });
  return hits;
}

}  // namespace shardkit::specs
