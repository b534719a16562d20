#include "core/base/rank_text.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardkit {

std::string FormatRanks(std::span<const int> ranks) {
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

std::vector<std::string> GroupsByMessage(
    std::span<const std::pair<int, std::string_view>> messages) {
  std::vector<std::pair<std::string_view, std::vector<int>>> groups;
  absl::flat_hash_map<std::string_view, size_t> group_of;  // message -> index in groups
  for (const auto& [rank, message] : messages) {
    const auto [it, added] = group_of.try_emplace(message, groups.size());
    if (added) groups.emplace_back(message, std::vector<int>{});
    groups[it->second].second.push_back(rank);
  }
  std::vector<std::string> parts;
  for (const auto& [message, ranks] : groups) {
    parts.push_back(
        absl::StrCat(FormatRanks(ranks), ": ", absl::string_view(message.data(), message.size())));
  }
  return parts;
}

std::string GroupByMessage(std::span<const std::pair<int, std::string_view>> messages) {
  return absl::StrJoin(GroupsByMessage(messages), "; ");
}

std::string TransferProgress::ToString() const {
  // A peer can appear once per message (segments): name each once, ascending.
  auto distinct = [](std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return ranks;
  };
  std::vector<std::string> parts;
  if (!silent.empty()) parts.push_back("not heard from " + FormatRanks(distinct(silent)));
  if (!unsent.empty())
    parts.push_back("sends to " + FormatRanks(distinct(unsent)) + " not confirmed");
  if (parts.empty()) parts.push_back("every transfer was confirmed");
  return absl::StrCat(absl::StrJoin(parts, ", "), " (received ", received, " of ", expected,
                      " bytes, sent ", sent, " of ", to_send, " bytes)");
}

}  // namespace shardkit
