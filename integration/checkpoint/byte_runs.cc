#include "integration/checkpoint/byte_runs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardkit::checkpoint {

absl::StatusOr<ByteRuns> RunsOf(const Shape& shape, int64_t element_bits,
                                const specs::ShardMetadata& shard) {
  ByteRuns runs;  // computed in bits, returned in bytes
  const size_t dims = shape.size();
  std::vector<int64_t> strides(dims);
  int64_t stride = element_bits;
  for (size_t k = dims; k-- > 0;) {
    strides[k] = stride;
    stride *= shape[k];
  }
  int64_t elements = 1;
  for (int64_t size : shard.sizes) elements *= size;
  if (elements == 0) return runs;
  for (size_t k = 0; k < dims; ++k) runs.base += shard.offsets[k] * strides[k];
  // The last dim the shard does not cover whole; the dims after it are whole, so a run spans that
  // dim's part and everything inside it.
  size_t cut = 0;
  for (size_t k = dims; k-- > 0;) {
    if (shard.sizes[k] != shape[k]) {
      cut = k;
      break;
    }
  }
  runs.length = element_bits;
  for (size_t k = cut; k < dims; ++k) runs.length *= shard.sizes[k];
  runs.count = 1;
  for (size_t k = 0; k < cut; ++k) {
    if (shard.sizes[k] == 1) continue;  // a dim of one index adds nothing to the run space
    runs.outer_sizes.push_back(shard.sizes[k]);
    runs.outer_strides.push_back(strides[k]);
    runs.count *= shard.sizes[k];
  }
  // Every run starts at base + a sum of outer strides: all on byte boundaries iff these are.
  int64_t misaligned = -1;
  if (runs.base % 8 != 0)
    misaligned = runs.base;
  else if (runs.length % 8 != 0)
    misaligned = runs.base + runs.length;
  for (int64_t s : runs.outer_strides) {
    if (misaligned < 0 && s % 8 != 0) misaligned = runs.base + s;
  }
  if (misaligned >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its bytes would start or end inside a byte, at bit ", misaligned,
        " of the tensor (elements of ", element_bits,
        " bits: a shard must start and end on byte boundaries in the flat element order)"));
  }
  runs.base /= 8;
  runs.length /= 8;
  for (int64_t& s : runs.outer_strides) s /= 8;
  return runs;
}

int64_t ByteRuns::Offset(int64_t n) const {
  int64_t offset = base;
  for (size_t k = outer_sizes.size(); k-- > 0;) {
    offset += (n % outer_sizes[k]) * outer_strides[k];
    n /= outer_sizes[k];
  }
  return offset;
}

int64_t ByteRuns::FirstEndingAfter(int64_t at) const {
  int64_t low = 0, high = count;  // the answer is in [low, high]
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (Offset(mid) + length > at) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

namespace {

// How many of the shard's bytes lie before tensor byte `at`.
int64_t ShardBytesBefore(const ByteRuns& runs, int64_t at) {
  const int64_t n = runs.FirstEndingAfter(at);
  if (n == runs.count) return runs.bytes();
  return n * runs.length + std::max<int64_t>(0, at - runs.Offset(n));
}

}  // namespace

std::pair<int64_t, int64_t> ShardSpan(const ByteRuns& runs, int64_t begin, int64_t end) {
  if (runs.count == 0 || begin >= end) return {0, 0};
  const int64_t first = ShardBytesBefore(runs, begin);
  return {first, ShardBytesBefore(runs, end) - first};
}

void ForEachPiece(const ByteRuns& runs, int64_t begin, int64_t end,
                  absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn) {
  if (runs.count == 0 || begin >= end) return;
  for (int64_t n = runs.FirstEndingAfter(begin); n < runs.count; ++n) {
    const int64_t start = runs.Offset(n);
    if (start >= end) break;
    const int64_t from = std::max(start, begin);
    const int64_t to = std::min(start + runs.length, end);
    fn(from, n * runs.length + (from - start), to - from);
  }
}

}  // namespace shardkit::checkpoint
