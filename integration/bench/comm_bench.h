// Communication benchmarks: the seed of `shardkit bench` (issue 7). A library so the CLI can call
// it; integration/bench:comm_bench is a stand-alone driver.
//
//   CommBenchOptions options;
//   options.mib = 64;
//   SHARDKIT_ASSIGN_OR_RETURN(CommBenchResult r, RunCommBench(*comm, options));
//   std::cout << r.ToJson() << "\n";
#ifndef SHARDKIT_INTEGRATION_BENCH_COMM_BENCH_H_
#define SHARDKIT_INTEGRATION_BENCH_COMM_BENCH_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/communicator.h"

namespace shardkit::bench {

enum class CommPattern { kBroadcast, kScatter };

struct CommBenchOptions {
  CommPattern pattern = CommPattern::kBroadcast;
  int64_t mib = 64;  // Broadcast: bytes per rank; Scatter: total, split unevenly-safe by rank
  int repeats = 5;   // after one warm-up
  int root = 0;
};

struct CommBenchResult {
  int rank = 0;
  int world = 1;
  std::string pattern;
  int64_t mib = 0;
  double median_s = 0;
  double min_s = 0;
  int64_t bytes_sent = 0;      // per repeat, payload
  int64_t bytes_received = 0;  // per repeat, payload
  std::string ToJson() const;  // one line
};

// Runs the benchmark on every rank (collective). Buffers are allocated and touched before timing.
// Errors: those of the communicator.
[[nodiscard]] absl::StatusOr<CommBenchResult> RunCommBench(Communicator& comm,
                                                           const CommBenchOptions& options);

}  // namespace shardkit::bench

#endif  // SHARDKIT_INTEGRATION_BENCH_COMM_BENCH_H_
