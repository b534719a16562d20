#include "core/collective_status.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace shardkit {
namespace {

constexpr size_t kMaxMessage = 2048;

std::string Encode(const absl::Status& status) {
  if (status.ok()) return std::string();
  const int32_t code = static_cast<int32_t>(status.code());
  std::string out(sizeof(code), '\0');
  std::memcpy(out.data(), &code, sizeof(code));
  std::string_view message(status.message().data(), status.message().size());
  out.append(message.substr(0, kMaxMessage));
  return out;
}

// "rank 4", "ranks 0, 2", "ranks 0-3, 5, 7-9": runs of three or more ranks as first-last.
std::string RankList(const std::vector<size_t>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j - i >= 2) {
      parts.push_back(absl::StrCat(ranks[i], "-", ranks[j]));
    } else {
      for (size_t k = i; k <= j; ++k) parts.push_back(absl::StrCat(ranks[k]));
    }
    i = j + 1;
  }
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(parts, ", "));
}

// One "<ranks>: <message>" per distinct message, ordered by the lowest rank that reported it.
std::string GroupByMessage(const std::vector<std::pair<size_t, absl::string_view>>& failures) {
  std::vector<std::pair<absl::string_view, std::vector<size_t>>> groups;
  absl::flat_hash_map<absl::string_view, size_t> group_of;  // message -> index in groups
  for (const auto& [rank, message] : failures) {
    const auto [it, added] = group_of.try_emplace(message, groups.size());
    if (added) groups.emplace_back(message, std::vector<size_t>{});
    groups[it->second].second.push_back(rank);
  }
  std::vector<std::string> parts;
  for (const auto& [message, ranks] : groups) {
    parts.push_back(absl::StrCat(RankList(ranks), ": ", message));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& local, std::string_view context,
                           const CallOptions& options) {
  const std::string mine = Encode(local);
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            comm.AllGather(ConstBuffer(mine), options));
  absl::StatusCode code = absl::StatusCode::kOk;
  std::vector<std::pair<size_t, absl::string_view>> failures;  // (rank, message), ascending
  for (size_t rank = 0; rank < all.size(); ++rank) {
    const std::string& entry = all[rank];
    if (entry.size() < sizeof(int32_t)) continue;  // OK on that rank
    int32_t raw = 0;
    std::memcpy(&raw, entry.data(), sizeof(raw));
    if (code == absl::StatusCode::kOk) code = static_cast<absl::StatusCode>(raw);
    failures.emplace_back(rank, absl::string_view(entry).substr(sizeof(int32_t)));
  }
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  return absl::Status(code, absl::StrCat(absl::string_view(context.data(), context.size()), ": ",
                                         GroupByMessage(failures)));
}

}  // namespace shardkit
