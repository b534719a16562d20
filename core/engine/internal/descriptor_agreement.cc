#include "core/engine/internal/descriptor_agreement.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"
#include "specs/fingerprint.h"

namespace shardkit::internal {
namespace {

using Json = nlohmann::json;

constexpr size_t kDigestBytes = sizeof(specs::Sha256Digest);
constexpr size_t kMaxDifferences = 4;

std::string ShortDump(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 200) text = text.substr(0, 197) + "...";
  return text;
}

void Diff(const Json& a, const Json& b, const std::string& path, size_t limit,
          std::vector<std::string>& out) {
  if (out.size() >= limit || a == b) return;
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      const std::string sub = path.empty() ? key : absl::StrCat(path, ".", key);
      if (!b.contains(key)) {
        out.push_back(absl::StrCat(sub, " is ", ShortDump(value), ", not absent"));
      } else {
        Diff(value, b[key], sub, limit, out);
      }
      if (out.size() >= limit) return;
    }
    for (const auto& [key, value] : b.items()) {
      if (!a.contains(key) && out.size() < limit) {
        out.push_back(absl::StrCat(path.empty() ? key : absl::StrCat(path, ".", key),
                                   " is absent, not ", ShortDump(value)));
      }
    }
    return;
  }
  out.push_back(absl::StrCat(path.empty() ? "descriptor" : path, " is ", ShortDump(a), ", not ",
                             ShortDump(b)));
}

// One rank's full report, exchanged only when the digests disagree.
std::string EncodeReport(const Json& descriptor, const std::vector<std::string>& errors,
                         absl::StatusCode code) {
  return Json{{"descriptor", descriptor}, {"errors", errors}, {"code", static_cast<int>(code)}}
      .dump();
}

absl::Status BuildMismatchError(const std::vector<std::string>& reports, std::string_view op) {
  std::vector<Json> descriptors;
  std::vector<std::pair<int, std::string>> errors;      // (rank, local error), ranks ascending
  absl::StatusCode local_code = absl::StatusCode::kOk;  // the lowest rank's with local errors
  for (size_t r = 0; r < reports.size(); ++r) {
    Json report = Json::parse(reports[r], nullptr, /*allow_exceptions=*/false);
    if (report.is_discarded() || !report.contains("descriptor")) {
      return absl::InternalError(
          absl::StrCat(std::string(op), ": malformed agreement report from rank ", r));
    }
    for (const auto& error : report["errors"]) {
      errors.emplace_back(static_cast<int>(r), error.get<std::string>());
    }
    if (local_code == absl::StatusCode::kOk && !report["errors"].empty()) {
      const Json& code = report["code"];
      local_code = code.is_number_integer() && code.get<int>() != 0
                       ? static_cast<absl::StatusCode>(code.get<int>())
                       : absl::StatusCode::kInvalidArgument;
    }
    descriptors.push_back(std::move(report["descriptor"]));
  }
  std::vector<std::string> problems;
  if (!errors.empty()) {
    // The same error on several ranks (a bad spec everywhere) is named once, with its ranks.
    std::vector<std::pair<int, std::string_view>> views(errors.begin(), errors.end());
    problems.push_back(GroupByMessage(views));
  }
  const size_t local_problems = problems.size();
  // The reference is the most common descriptor (ties: the lowest rank holding one).
  std::map<std::string, int> votes;
  for (const Json& d : descriptors) ++votes[d.dump()];
  size_t reference = 0;
  for (size_t r = 1; r < descriptors.size(); ++r) {
    if (votes[descriptors[r].dump()] > votes[descriptors[reference].dump()]) reference = r;
  }
  for (size_t r = 0; r < descriptors.size(); ++r) {
    if (descriptors[r] == descriptors[reference]) continue;
    problems.push_back(absl::StrCat(
        "rank ", r, " differs from rank ", reference, ": ",
        absl::StrJoin(DescribeDifferences(descriptors[r], descriptors[reference], kMaxDifferences),
                      ", ")));
  }
  // Local problems alone (every rank describes the same operation) are no disagreement.
  const bool disagree = problems.size() > local_problems;
  return absl::Status(disagree ? absl::StatusCode::kInvalidArgument : local_code,
                      absl::StrCat(std::string(op), disagree ? ": ranks do not agree: " : ": ",
                                   absl::StrJoin(problems, "; ")));
}

}  // namespace

std::vector<std::string> DescribeDifferences(const Json& a, const Json& b, size_t limit) {
  std::vector<std::string> out;
  Diff(a, b, "", limit, out);
  return out;
}

absl::Status AgreeOnDescriptor(Communicator& comm, const Json& descriptor,
                               const std::vector<std::string>& local_errors, std::string_view op,
                               const CallOptions& options, absl::StatusCode local_code) {
  const std::string text = descriptor.dump();
  const specs::Sha256Digest digest = specs::Sha256(text);
  std::string mine(kDigestBytes + 1, '\0');
  std::memcpy(mine.data(), digest.data(), kDigestBytes);
  mine[kDigestBytes] = local_errors.empty() ? 1 : 0;
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> digests,
                            comm.AllGather(ConstBuffer(mine), options));
  bool agreed = true;
  for (const std::string& d : digests) agreed = agreed && d == digests[0] && d.back() == 1;
  if (agreed) return absl::OkStatus();
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<std::string> reports,
      comm.AllGather(ConstBuffer(EncodeReport(descriptor, local_errors, local_code)), options));
  return BuildMismatchError(reports, op);
}

}  // namespace shardkit::internal
