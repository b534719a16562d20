// The rank side of `shardkit bench --strategy sync` (docs/cli.md): times repeated weight syncs
// (core/engine/sync.h) against a raw baseline — contiguous buffers of the same sizes between
// the same pairs of ranks, moved with bare backend send/recv in one exchange.
//
// Method: `params` two-dimensional parameters ([rows, 4096 bytes / element size], `mib` MiB in
// all; with `varied`, parameter i is (i % 12 + 1) units of rows, 4 to 48 KiB at the smallest
// unit) chunked on `from_dim` over the source ranks 0..sources-1 and on `to_dim` over the
// destination ranks (sources..world-1, or all ranks with `same_ranks`). Sources hold touched
// data, destinations touched buffers. PlanSync once (timed), one untimed warm-up Sync, then
// `repeats` Syncs, each timed from a Barrier before it to a Barrier after it; then `repeats`
// raw exchanges the same way.
#ifndef SHARDKIT_INTEGRATION_BENCH_SYNC_BENCH_H_
#define SHARDKIT_INTEGRATION_BENCH_SYNC_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/tensor/dtype.h"

namespace shardkit::bench {

struct SyncBenchOptions {
  int64_t mib = 64;
  int64_t params = 1;
  int64_t repeats = 5;
  DType dtype = DType::kFloat32;
  int64_t sources = 0;  // 0: half the world (rounded down, at least 1)
  bool same_ranks = false;
  bool varied = false;
  int64_t from_dim = 0, to_dim = 1;
  int64_t budget_mib = 64;  // SyncOptions::memory_bytes
  CallOptions call;
};

struct SyncBenchResult {
  int rank = 0;
  int world = 1;
  int64_t mib = 0;
  std::string role;  // "source", "destination", "both"
  std::string device;
  double median_s = 0;  // one Sync call
  double min_s = 0;
  double baseline_rss_mib = 0;
  double peak_rss_mib = 0;     // VmHWM after the Syncs, before the baseline allocates its buffers
  int64_t bytes_sent = 0;      // per call, to other ranks
  int64_t bytes_received = 0;  // per call, from other ranks (local copies excluded)
  double plan_s = 0;           // PlanSync
  double first_call_s = 0;     // the warm-up call (destination pages touched, staging allocated)
  double raw_median_s = 0;     // the baseline
  // The baseline's buffers through the backend's AllToAllSegments path (Gloo: the payload mesh,
  // which Sync's payload takes), without an agreement.
  double raw_segments_median_s = 0;
  double pack_median_s = 0;    // of median_s: packing strided sends and local copies
  double unpack_median_s = 0;  // of median_s: unpacking strided receives
  double recv_mib_per_s = 0;   // bytes_received / median_s
  int rounds = 0;
  int64_t pieces = 0;      // this rank's (sends and receives)
  double tensors_mib = 0;  // this rank's source and destination shards: what it must hold
  // The line: the keys of `shardkit bench`'s line that apply ("rank", "world", "mib", "strategy":
  // "sync", "median_s", "min_s", "baseline_rss_mib", "peak_rss_mib", "bytes_sent",
  // "bytes_received", "device"), then the sync_* keys.
  std::string ToJson() const;
};

// Errors: kInvalidArgument for sizes or dims out of range, a world too small for two groups.
[[nodiscard]] absl::Status ValidateSyncBenchOptions(const SyncBenchOptions& options, int world);

// Collective over every rank of `comm`.
[[nodiscard]] absl::StatusOr<SyncBenchResult> RunSyncBench(Communicator& comm,
                                                           const SyncBenchOptions& options);

}  // namespace shardkit::bench

#endif  // SHARDKIT_INTEGRATION_BENCH_SYNC_BENCH_H_
