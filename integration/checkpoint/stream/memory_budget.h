// The memory budget of the streaming paths (`--memory-mib` of shard, reshard and gather;
// SaveShards, LoadShards): how it is split into windows and staging buffers, and how large a round
// is within it. The budget is a bound; the window is sized for speed under it (RoundWindow).
//
//   const Budget budget = SplitBudget(options.memory_bytes);          // the bound's split
//   const int64_t window = RoundWindow(budget, kScatterRoundBytes, total_bytes);
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_MEMORY_BUDGET_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_MEMORY_BUDGET_H_

#include <cstdint>

namespace shardkit::checkpoint {

// How a rank's memory budget is spent: the source holds two windows (round k being sent, k+1
// being read) and a staging buffer for short pieces; a receiver holds two buffers of at most a
// window (round k being received, k-1 being written). So no rank holds more than `budget` bytes
// of tensor data, whatever the checkpoint's size.
struct Budget {
  int64_t window = 0;   // bytes per round
  int64_t staging = 0;  // the source's staging buffer (each of them)
};
// `staging_buffers`: 2 when the source reads through one more staging buffer of its own (a shard
// directory: ShardDirSource).
Budget SplitBudget(int64_t budget_bytes, int staging_buffers = 1);

// The default budget (`--memory-mib 512`, ShardWriteOptions, GatherOptions, SaveShards and
// LoadShards options): a bound the rounds stay within. The rounds themselves are no larger than
// RoundWindow chooses, so a run under the default holds far less than this on a few ranks.
inline constexpr int64_t kDefaultMemoryBytes = int64_t{512} << 20;

// Round sizes that moved checkpoints fastest on the machines we measured (docs/performance.md,
// "The memory budget"): larger rounds pay first touch of fresh memory for their buffers and
// overlap reading, sending and writing over fewer rounds; smaller ones pay a status round each.
// Scatter and broadcast: the source's window (it holds two, and sends a share of each to every
// rank: larger rounds amortize each round's status round and scatter). Direct (and reshard): each
// rank's share of a window, so the window grows with the world. Gather (one process reading into
// a window and writing it out): its window, best kept small enough to stay in the CPU's cache.
inline constexpr int64_t kScatterRoundBytes = int64_t{64} << 20;
inline constexpr int64_t kRankRoundBytes = int64_t{16} << 20;
inline constexpr int64_t kGatherRoundBytes = int64_t{8} << 20;
inline constexpr int64_t kMinRoundBytes = int64_t{1} << 20;

// The window of a run moving `total_bytes`: min(budget.window, target, max(total_bytes / 4,
// kMinRoundBytes)) — within the budget, no larger than `target` (kScatterRoundBytes,
// kRankRoundBytes times the ranks that share a window, kGatherRoundBytes), and small enough that
// there are at least four rounds to overlap (never below kMinRoundBytes for that). At least 1.
int64_t RoundWindow(const Budget& budget, int64_t target, int64_t total_bytes);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_MEMORY_BUDGET_H_
