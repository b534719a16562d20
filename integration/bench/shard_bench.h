// The rank side of `shardkit bench` (docs/cli.md): times ShardParameter
// (or ShardModule over many parameters) of a source rank's parameter against `raw`, the same bytes
// per rank moved with bare backend send/recv. integration/cli/bench_command.cc launches the ranks.
//
//   ShardBenchOptions options;
//   options.mib = 256;
//   SHARDKIT_ASSIGN_OR_RETURN(ShardBenchResult r, RunShardBench(*comm, options));
//   std::cout << r.ToJson() << "\n";  // the one line this rank prints
//
// Devices: tensors live where the backend moves them: host memory (Gloo, MPI), or the rank's CUDA
// device (NCCL: the source's parameter, the shards and raw's buffers are device memory).
//
// Method: rank 0 holds a `mib` MiB parameter (`dtype`, shape [mib * 256, 4096 / element size],
// chunk-sharded on dim 0 over every rank, or `params` such parameters of mib / params MiB each);
// other ranks start from meta tensors. Each of `repeats` rounds is timed from a Barrier before the
// call to a Barrier after it; then the slots are reset (the shards are freed) for the next round.
#ifndef SHARDKIT_INTEGRATION_BENCH_SHARD_BENCH_H_
#define SHARDKIT_INTEGRATION_BENCH_SHARD_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/tensor/dtype.h"

namespace shardkit::bench {

// kCopy: no communication at all; each rank copies the bytes its chunk holds from one buffer to
// another on its device (memcpy on the CPU, cudaMemcpy device-to-device on CUDA): the memory-copy
// floor a one-host transfer is measured against.
// kReshard: the parameter(s) scattered once by rows (untimed), then each round is a Reshard
// (core/engine/reshard.h) of every parameter to columns over the same ranks, the result dropped.
enum class BenchStrategy { kScatter, kBroadcast, kRaw, kCopy, kReshard };

// "scatter" / "broadcast" / "raw" / "copy" / "reshard". Errors: kInvalidArgument naming the
// string.
[[nodiscard]] absl::StatusOr<BenchStrategy> ParseBenchStrategy(std::string_view name);
std::string_view BenchStrategyName(BenchStrategy strategy);

struct ShardBenchOptions {
  BenchStrategy strategy = BenchStrategy::kScatter;
  int64_t mib = 64;    // total size of the parameter(s)
  int64_t params = 1;  // 1: ShardParameter; more: ShardModule over this many parameters
  int64_t repeats = 5;
  DType dtype = DType::kFloat32;
  int64_t budget_mib = 64;  // reshard: staging per rank (ReshardOptions::memory_bytes)
  CallOptions call;
};

// Errors: kInvalidArgument for mib < 1, params < 1, repeats < 1, or parameters smaller than one
// 4 KiB row.
[[nodiscard]] absl::Status ValidateShardBenchOptions(const ShardBenchOptions& options);

struct ShardBenchResult {
  int rank = 0;
  int world = 1;
  int64_t mib = 0;
  std::string strategy;
  std::string device;  // where the tensors live: "cpu", or "cuda" (this rank's device) for NCCL
  double median_s = 0;
  double min_s = 0;
  double baseline_rss_mib = 0;  // VmRSS before the parameter exists
  double peak_rss_mib = 0;      // VmHWM (reset at the baseline where the kernel allows)
  int64_t bytes_sent = 0;       // tensor payload per round (agreement headers excluded)
  int64_t bytes_received = 0;   // copy: the bytes copied per round
  double agree_median_s = 0;    // ShardStats::agree_seconds; 0 for raw
  double agree_max_s = 0;       // the slowest round's agreement
  double check_median_s = 0;    // ShardStats::check_seconds: the local checks before it
  // The last round's agreement on this rank (Unix microseconds; 0 for raw): across one host's
  // ranks, max(end) - max(begin) is its latency after the last rank arrived.
  int64_t agree_begin_us = 0, agree_end_us = 0;
  int connections = -1;   // TCP connections this rank holds after the rounds; -1 unknown
  double startup_s = -1;  // launch to the end of the first Barrier (set by the caller); -1
  // The contract's line: {"rank":…,"world":…,"mib":…,"strategy":…,"median_s":…,…}.
  std::string ToJson() const;
};

// Collective: runs the benchmark on every rank of `comm`.
// Errors: those of ValidateShardBenchOptions; allocation and communicator errors.
[[nodiscard]] absl::StatusOr<ShardBenchResult> RunShardBench(Communicator& comm,
                                                             const ShardBenchOptions& options);

}  // namespace shardkit::bench

#endif  // SHARDKIT_INTEGRATION_BENCH_SHARD_BENCH_H_
