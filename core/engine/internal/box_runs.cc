#include "core/engine/internal/box_runs.h"

#include "absl/container/inlined_vector.h"

namespace shardkit::internal {

void ForEachBoxRun(std::span<const int64_t> tensor_sizes, std::span<const int64_t> offsets,
                   std::span<const int64_t> sizes, int64_t element_size,
                   absl::FunctionRef<void(int64_t, int64_t)> fn) {
  const size_t n = sizes.size();
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  if (n == 0) {
    fn(0, element_size);
    return;
  }
  absl::InlinedVector<int64_t, 8> stride(n);
  int64_t step = element_size;
  for (size_t d = n; d-- > 0;) {
    stride[d] = step;
    step *= tensor_sizes[d];
  }
  // Merge inner dims the box covers whole: dim `split` is the outermost one in the run.
  size_t split = n - 1;
  int64_t run = sizes[n - 1] * element_size;
  while (split > 0 && sizes[split] == tensor_sizes[split]) {
    --split;
    run *= sizes[split];
  }
  int64_t base = 0;
  for (size_t d = 0; d < n; ++d) base += offsets[d] * stride[d];
  absl::InlinedVector<int64_t, 8> index(split, 0);  // over dims [0, split)
  while (true) {
    int64_t at = base;
    for (size_t d = 0; d < split; ++d) at += index[d] * stride[d];
    fn(at, run);
    size_t d = split;
    while (d > 0) {
      --d;
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (split == 0) return;
  }
}

int64_t BoxStartOffset(std::span<const int64_t> tensor_sizes, std::span<const int64_t> offsets,
                       int64_t element_size) {
  int64_t at = 0, step = element_size;
  for (size_t d = tensor_sizes.size(); d-- > 0;) {
    at += offsets[d] * step;
    step *= tensor_sizes[d];
  }
  return at;
}

}  // namespace shardkit::internal
