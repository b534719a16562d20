#include "integration/launch/error_lines.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/rank_text.h"
#include "integration/launch/line_prefixer.h"

namespace shardkit::launch {

void ErrorLines::Release(int rank, std::string* out) {
  auto it = held_.find(rank);
  if (it == held_.end()) return;
  out->append(it->second.line);
  held_.erase(it);
}

std::string ErrorLines::Feed(int rank, std::string_view text, absl::Time now) {
  const std::string candidate = RankLinePrefix(rank) + error_prefix_;
  std::string out;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const size_t size = newline == std::string_view::npos ? text.size() : newline + 1;
    const std::string_view piece = text.substr(0, size);
    text.remove_prefix(size);
    Release(rank, &out);  // a further line: the one held was not the last
    const bool whole_line = piece.back() == '\n';
    if (whole_line && absl::StartsWith(absl::string_view(piece.data(), piece.size()), candidate)) {
      held_[rank] = Held{std::string(piece), now};
    } else {
      out.append(piece);
    }
  }
  return out;
}

void ErrorLines::StreamEnded(int rank) {
  if (auto it = held_.find(rank); it != held_.end()) it->second.stream_ended = true;
}

std::string ErrorLines::ReleaseDue(absl::Time now) {
  std::string out;
  for (auto it = held_.begin(); it != held_.end();) {
    if (!it->second.stream_ended && now - it->second.since >= hold_) {
      out.append(it->second.line);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<absl::Time> ErrorLines::NextDue() const {
  std::optional<absl::Time> next;
  for (const auto& [rank, held] : held_) {
    if (held.stream_ended) continue;
    if (!next.has_value() || held.since + hold_ < *next) next = held.since + hold_;
  }
  return next;
}

std::string ErrorLines::Finish(const std::vector<RankOutcome>& ranks) {
  std::string out, exits;
  std::vector<std::pair<int, std::string_view>> errors;  // (rank, its error line), ascending
  for (const RankOutcome& rank : ranks) {
    auto it = held_.find(rank.rank);
    const bool exited_failing = rank.failed() && !rank.signaled;
    if (exited_failing && it != held_.end()) {
      std::string_view line = it->second.line;
      line.remove_prefix(RankLinePrefix(rank.rank).size());
      line.remove_suffix(1);  // '\n'
      errors.emplace_back(rank.rank, line);
    } else if (it != held_.end()) {
      out.append(it->second.line);
    } else if (exited_failing) {
      absl::StrAppend(&exits, FailureLine(rank), "\n");
    }
  }
  for (const std::string& group : GroupsByMessage(errors)) absl::StrAppend(&out, group, "\n");
  held_.clear();
  return out + exits;
}

}  // namespace shardkit::launch
