#include "integration/checkpoint/progress.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace shardkit::checkpoint {

std::string FormatBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatRate(int64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  return FormatBytes(static_cast<int64_t>(static_cast<double>(bytes) / seconds)) + "/s";
}

std::string FormatEta(int64_t done, int64_t total, double seconds) {
  if (done <= 0 || seconds <= 0) return "ETA -";
  const double left = static_cast<double>(total - done) * seconds / static_cast<double>(done);
  return absl::StrFormat("ETA %.0f s", left);
}

Progress::Progress(std::ostream& out, bool enabled, std::string what, int64_t total_items,
                   int64_t total_bytes, std::string unit)
    : out_(out),
      enabled_(enabled),
      what_(std::move(what)),
      unit_(std::move(unit)),
      total_items_(total_items),
      total_bytes_(total_bytes),
      start_(absl::Now()),
      last_print_(start_) {}

void Progress::Step(int64_t items, int64_t bytes) {
  const absl::Time now = absl::Now();
  if (!enabled_ || now - last_print_ < absl::Seconds(1)) return;
  last_print_ = now;
  const double elapsed = Elapsed();
  out_ << absl::StrFormat("%s %d/%d %s, %s/%s, %s, %s\n", what_, items, total_items_, unit_,
                          FormatBytes(bytes), FormatBytes(total_bytes_), FormatRate(bytes, elapsed),
                          FormatEta(bytes, total_bytes_, elapsed))
       << std::flush;
}

double Progress::Elapsed() const { return absl::ToDoubleSeconds(absl::Now() - start_); }

}  // namespace shardkit::checkpoint
