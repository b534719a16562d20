// Progress lines on stderr for long checkpoint runs, and byte/rate formatting for summaries.
//
//   Progress progress(std::cerr, enabled, "shardkit shard: reading", n, total_bytes);
//   for (...) { ...; progress.Step(k + 1, bytes_so_far); }
//
// A line ("shardkit shard: reading 3/12 parameters, 1.5 GiB/4.0 GiB, 820.0 MiB/s, ETA 3 s") is
// printed at most once a second and never during the first second, so short runs stay quiet. Not
// thread-safe.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_PROGRESS_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_PROGRESS_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/time/time.h"

namespace shardkit::checkpoint {

// "512 B", "1.5 KiB", "3.0 MiB", "1.2 GiB".
std::string FormatBytes(int64_t bytes);

// "820.0 MiB/s" (bytes over seconds; "-" when no time passed).
std::string FormatRate(int64_t bytes, double seconds);

// "ETA 12 s": the time left at the rate so far ("ETA -" before any progress).
std::string FormatEta(int64_t done, int64_t total, double seconds);

class Progress {
 public:
  // `unit` names the items ("parameters", "rounds").
  Progress(std::ostream& out, bool enabled, std::string what, int64_t total_items,
           int64_t total_bytes, std::string unit = "parameters");

  // `items` and `bytes` done so far.
  void Step(int64_t items, int64_t bytes);

  // Seconds since construction.
  double Elapsed() const;

 private:
  std::ostream& out_;
  bool enabled_;
  std::string what_;
  std::string unit_;
  int64_t total_items_;
  int64_t total_bytes_;
  absl::Time start_;
  absl::Time last_print_;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_PROGRESS_H_
