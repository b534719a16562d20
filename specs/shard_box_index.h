// ShardBoxIndex: which shards of a tensor intersect a box (offsets and sizes per dimension), and
// where — without testing every shard. Readers of sharded checkpoints need it: `reshard` reading a
// new shard from the old ones (integration/checkpoint/source/shard_dir_source.h), and a reader of
// another format or a weight-sync engine mapping one layout onto another.
//
//   ShardBoxIndex index = ShardBoxIndex::FromShards(metadata);  // specs::ShardMetadata, any layout
//   for (const BoxHit& hit : index.Intersecting({.offsets = {4, 0}, .sizes = {2, 8}})) {
//     // shard hit.shard holds hit.intersection (in tensor coordinates) of the box
//   }
//
// Per dimension the shards' intervals [offset, offset + size) are sorted by start with a running
// maximum of ends, so the shards whose interval in that dimension meets the box's are found by two
// binary searches; a lookup walks the dimension with the fewest candidates and keeps those that
// meet the box in every dimension. A layout cut along one dimension (chunk) is thus found in
// O(log n + hits); only boxes that meet many intervals in every dimension cost more.
// Shards with a zero size are never found. Immutable after construction: safe to share between
// threads.
#ifndef SHARDKIT_SPECS_SHARD_BOX_INDEX_H_
#define SHARDKIT_SPECS_SHARD_BOX_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor/shape.h"
#include "specs/shard_metadata.h"

namespace shardkit::specs {

// A box of a tensor: offsets[d] .. offsets[d] + sizes[d] in every dimension d.
struct Box {
  Shape offsets;
  Shape sizes;

  friend bool operator==(const Box& a, const Box& b) {
    return a.offsets == b.offsets && a.sizes == b.sizes;
  }
};

// Shard `shard` (its index in the boxes the index was built from) holds `intersection` of a box.
struct BoxHit {
  size_t shard = 0;
  Box intersection;
};

class ShardBoxIndex {
 public:
  ShardBoxIndex() = default;
  // Precondition (checked: aborts): every box has as many offsets and sizes as the first, none
  // negative.
  explicit ShardBoxIndex(std::vector<Box> boxes);
  // The boxes of `shards` (their offsets and sizes), in their order.
  static ShardBoxIndex FromShards(const std::vector<ShardMetadata>& shards);

  size_t size() const { return boxes_.size(); }
  const Box& box(size_t shard) const { return boxes_[shard]; }

  // The shards whose box meets `box` with a non-empty intersection, by ascending shard index.
  // A box of another rank than the shards' meets none; for 0-dimensional shards every shard
  // meets a 0-dimensional box.
  std::vector<BoxHit> Intersecting(const Box& box) const;

  // The shards whose interval in dimension `dim` meets [begin, end), ascending (the per-dimension
  // lookup the box lookup is built on). Precondition: dim < rank.
  std::vector<size_t> IntersectingInDim(size_t dim, int64_t begin, int64_t end) const;

 private:
  struct Interval {
    int64_t begin = 0;
    int64_t end = 0;
    size_t shard = 0;
  };
  struct Dim {
    std::vector<Interval> by_begin;  // non-empty shards, by begin
    std::vector<int64_t> max_end;    // max_end[i]: the largest end of by_begin[0..i]
  };
  // [first, last) of dims_[dim].by_begin: the candidates meeting [begin, end) in that dimension.
  std::pair<size_t, size_t> Candidates(size_t dim, int64_t begin, int64_t end) const;

  size_t rank_ = 0;
  std::vector<Box> boxes_;
  std::vector<bool> empty_;  // per shard: a zero size somewhere
  std::vector<Dim> dims_;
};

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_SHARD_BOX_INDEX_H_
