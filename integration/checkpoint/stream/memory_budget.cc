#include "integration/checkpoint/stream/memory_budget.h"

#include <algorithm>

namespace shardkit::checkpoint {

Budget SplitBudget(int64_t budget_bytes, int staging_buffers) {
  Budget budget;
  budget.staging = std::clamp<int64_t>(budget_bytes / 16, 64 << 10, 4 << 20);
  budget.staging = std::min(budget.staging, std::max<int64_t>(budget_bytes / 4, 1));
  budget.window = std::max<int64_t>((budget_bytes - budget.staging * staging_buffers) / 2, 1);
  return budget;
}

int64_t RoundWindow(const Budget& budget, int64_t target, int64_t total_bytes) {
  const int64_t overlap = std::max(total_bytes / 4, kMinRoundBytes);
  return std::max<int64_t>(std::min({budget.window, target, overlap}), 1);
}

}  // namespace shardkit::checkpoint
