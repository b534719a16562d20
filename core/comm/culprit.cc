#include "core/comm/culprit.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace shardkit {
namespace {

constexpr char kUrl[] = "shardkit/culprit";

}  // namespace

void SetCulprit(absl::Status& status, const Culprit& culprit) {
  if (status.ok() || culprit.rank < 0) return;
  status.SetPayload(kUrl,
                    absl::Cord(absl::StrCat(culprit.rank, " ", static_cast<int>(culprit.how))));
}

std::optional<Culprit> GetCulprit(const absl::Status& status) {
  const auto payload = status.GetPayload(kUrl);  // absl::optional in this Abseil
  if (!payload.has_value()) return std::nullopt;
  const std::vector<std::string> parts = absl::StrSplit(std::string(*payload), ' ');
  int rank = -1, how = -1;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) ||
      !absl::SimpleAtoi(parts[1], &how) || rank < 0 || how < 0 ||
      how > static_cast<int>(Culprit::How::kInterrupted)) {
    return std::nullopt;
  }
  return Culprit{rank, static_cast<Culprit::How>(how)};
}

std::string DescribeCulprit(const Culprit& culprit) {
  switch (culprit.how) {
    case Culprit::How::kVanished:
      return absl::StrCat("rank ", culprit.rank,
                          " went away without closing its communicator (killed or crashed?)");
    case Culprit::How::kLeft:
      return absl::StrCat("rank ", culprit.rank, " went away or gave up");
    case Culprit::How::kInterrupted:
      return absl::StrCat("rank ", culprit.rank, " was interrupted", kInterruptedWhy);
    case Culprit::How::kStalled:
      break;
  }
  return absl::StrCat("rank ", culprit.rank,
                      " stopped making progress (stalled? the ranks waiting on it reached their "
                      "deadline)");
}

absl::Status LeadWithCulprit(const absl::Status& status, std::string_view what) {
  const std::optional<Culprit> culprit = GetCulprit(status);
  if (!culprit.has_value()) return status;
  return WithMessage(status, absl::StrCat(std::string(what), " failed: ", DescribeCulprit(*culprit),
                                          "\n", status.message()));
}

}  // namespace shardkit
