#include "specs/placement.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/check.h"

namespace shardkit::specs {
namespace {

constexpr std::string_view kRankPrefix = "rank:";

absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status PlacementError(std::string_view text, std::string_view why) {
  constexpr size_t kMaxShown = 64;
  const bool cut = text.size() > kMaxShown;
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid placement \"", ToAbsl(text.substr(0, kMaxShown)),
      cut ? "...\": " : "\": ", ToAbsl(why),
      " (expected \"rank:<R>\" or \"rank:<R>/<device>\" with device cpu, cuda or cuda:<N>)"));
}

}  // namespace

absl::Status ValidateWorldSize(int64_t world_size) {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", world_size, " is outside [1, ", kMaxWorldSize, "]"));
  }
  return absl::OkStatus();
}

std::optional<int64_t> ParseRankDigits(std::string_view digits) {
  if (digits.empty() || digits.size() > 10) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value > kMaxRank) return std::nullopt;
  return value;
}

absl::StatusOr<Placement> Placement::Parse(std::string_view text) {
  if (text.substr(0, kRankPrefix.size()) != kRankPrefix) {
    return PlacementError(text,
                          "must start with \"rank:\"; worker names and device-only placements "
                          "are not supported");
  }
  std::string_view rest = text.substr(kRankPrefix.size());
  const size_t slash = rest.find('/');
  const std::string_view digits = rest.substr(0, slash);
  std::optional<int64_t> rank = ParseRankDigits(digits);
  if (!rank.has_value()) {
    return PlacementError(text, absl::StrCat("rank \"", ToAbsl(digits),
                                             "\" is not a number in [0, 2147483647] written "
                                             "without sign or leading zeros"));
  }
  if (slash == std::string_view::npos) return Placement(*rank, std::nullopt);
  const std::string_view device_text = rest.substr(slash + 1);
  absl::StatusOr<Device> device = Device::Parse(device_text);
  if (!device.ok()) {
    return PlacementError(
        text, absl::StrCat("device \"", ToAbsl(device_text), "\" is not cpu, cuda or cuda:<N>"));
  }
  return Placement(*rank, *device);
}

Placement Placement::ForRank(int64_t rank, std::optional<Device> device) {
  SHARDKIT_CHECK(rank >= 0 && rank <= kMaxRank) << "rank " << rank;
  return Placement(rank, device);
}

std::string Placement::ToString() const {
  std::string out = absl::StrCat(ToAbsl(kRankPrefix), rank_);
  if (device_.has_value()) absl::StrAppend(&out, "/", device_->ToString());
  return out;
}

}  // namespace shardkit::specs
