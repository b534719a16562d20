#include "core/tensor/byte_runs.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace shardkit {

absl::StatusOr<ByteRuns> RunsOf(const Shape& shape, int64_t element_bits,
                                std::span<const int64_t> offsets, std::span<const int64_t> sizes) {
  ByteRuns runs;  // computed in bits, returned in bytes
  const size_t dims = shape.size();
  std::vector<int64_t> strides(dims);
  int64_t stride = element_bits;
  for (size_t k = dims; k-- > 0;) {
    strides[k] = stride;
    stride *= shape[k];
  }
  int64_t elements = 1;
  for (int64_t size : sizes) elements *= size;
  if (elements == 0) return runs;
  for (size_t k = 0; k < dims; ++k) runs.base += offsets[k] * strides[k];
  // The last dim the shard does not cover whole; the dims after it are whole, so a run spans that
  // dim's part and everything inside it.
  size_t cut = 0;
  for (size_t k = dims; k-- > 0;) {
    if (sizes[k] != shape[k]) {
      cut = k;
      break;
    }
  }
  runs.length = element_bits;
  for (size_t k = cut; k < dims; ++k) runs.length *= sizes[k];
  runs.count = 1;
  for (size_t k = 0; k < cut; ++k) {
    if (sizes[k] == 1) continue;  // a dim of one index adds nothing to the run space
    runs.outer_sizes.push_back(sizes[k]);
    runs.outer_strides.push_back(strides[k]);
    runs.count *= sizes[k];
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

void ForEachRun(const ByteRuns& runs, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (runs.count == 0) return;
  const size_t dims = runs.outer_sizes.size();
  absl::InlinedVector<int64_t, 8> index(dims, 0);
  int64_t at = runs.base;
  for (int64_t n = 0; n < runs.count; ++n) {
    fn(at, runs.length);
    for (size_t k = dims; k-- > 0;) {  // the odometer: the innermost index that can advance
      at += runs.outer_strides[k];
      if (++index[k] < runs.outer_sizes[k]) break;
      at -= index[k] * runs.outer_strides[k];
      index[k] = 0;
    }
  }
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

namespace {

// The next run of shard i that reaches into the range: run n, starting at tensor byte `start`.
struct NextRun {
  int64_t start;
  size_t i;
  int64_t n;
};

// Whether `a` comes after `b` (a min-heap by start, then shard, under std's max-heap functions).
bool Later(const NextRun& a, const NextRun& b) {
  return a.start != b.start ? a.start > b.start : a.i > b.i;
}

// Restores the heap after its first element moved later (one path down, not a pop and a push).
void SiftDown(std::vector<NextRun>& heap) {
  for (size_t at = 0;;) {
    size_t child = 2 * at + 1;
    if (child >= heap.size()) return;
    if (child + 1 < heap.size() && Later(heap[child], heap[child + 1])) ++child;
    if (!Later(heap[at], heap[child])) return;
    std::swap(heap[at], heap[child]);
    at = child;
  }
}

}  // namespace

void ForEachPieceInOrder(std::span<const ByteRuns* const> runs, int64_t begin, int64_t end,
                         absl::FunctionRef<void(size_t, int64_t, int64_t, int64_t)> fn) {
  if (runs.size() == 1) {  // nothing to merge
    return ForEachPiece(*runs[0], begin, end, [&](int64_t at, int64_t shard_at, int64_t bytes) {
      fn(0, at, shard_at, bytes);
    });
  }
  if (begin >= end) return;
  std::vector<NextRun> heap;
  for (size_t i = 0; i < runs.size(); ++i) {
    const int64_t n = runs[i]->count == 0 ? 0 : runs[i]->FirstEndingAfter(begin);
    if (n < runs[i]->count && runs[i]->Offset(n) < end) heap.push_back({runs[i]->Offset(n), i, n});
  }
  std::make_heap(heap.begin(), heap.end(), Later);
  while (!heap.empty()) {
    NextRun& run = heap.front();
    const ByteRuns& r = *runs[run.i];
    const int64_t from = std::max(run.start, begin);
    const int64_t to = std::min(run.start + r.length, end);
    fn(run.i, from, run.n * r.length + (from - run.start), to - from);
    const int64_t start = run.n + 1 < r.count ? r.Offset(run.n + 1) : end;
    if (start < end) {
      run = {start, run.i, run.n + 1};
      SiftDown(heap);
    } else {
      std::pop_heap(heap.begin(), heap.end(), Later);
      heap.pop_back();
    }
  }
}

}  // namespace shardkit
