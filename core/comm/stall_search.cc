#include "core/comm/stall_search.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace shardkit {
namespace {

std::string Key(const std::string& key_prefix, int rank) {
  return absl::StrCat(key_prefix, "/waiting/", rank);
}

// The ranks reachable from `start` through `records` that have none.
std::set<int> Unrecorded(const std::vector<int>& start,
                         const std::map<int, std::vector<int>>& records) {
  std::set<int> seen, sinks;
  std::vector<int> todo = start;
  while (!todo.empty()) {
    const int r = todo.back();
    todo.pop_back();
    if (!seen.insert(r).second) continue;
    auto it = records.find(r);
    if (it == records.end()) {
      sinks.insert(r);
    } else {
      todo.insert(todo.end(), it->second.begin(), it->second.end());
    }
  }
  return sinks;
}

}  // namespace

absl::Duration StallGrace(absl::Duration budget) {
  return std::clamp(budget / 10, absl::Milliseconds(50), absl::Milliseconds(500));
}

int FindStalledRank(Store& store, const std::string& key_prefix, int rank,
                    const std::vector<int>& waited_on, absl::Duration grace) {
  if (waited_on.empty() || !store.Set(Key(key_prefix, rank), absl::StrJoin(waited_on, ",")).ok()) {
    return -1;
  }
  std::map<int, std::vector<int>> records{{rank, waited_on}};
  const absl::Time until = absl::Now() + grace;
  std::set<int> sinks = Unrecorded(waited_on, records);
  while (!sinks.empty() && absl::Now() < until) {
    bool learned = false;
    for (int r : sinks) {
      absl::StatusOr<bool> present = store.Check({Key(key_prefix, r)});
      if (!present.ok()) return -1;
      if (!*present) continue;
      absl::StatusOr<std::string> text = store.Get(Key(key_prefix, r), absl::ZeroDuration());
      if (!text.ok()) return -1;
      std::vector<int>& peers = records[r];
      for (absl::string_view part : absl::StrSplit(*text, ',', absl::SkipEmpty())) {
        int peer = -1;
        if (absl::SimpleAtoi(part, &peer)) peers.push_back(peer);
      }
      learned = true;
    }
    if (learned) {
      sinks = Unrecorded(waited_on, records);
    } else {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  return sinks.empty() ? -1 : *sinks.begin();
}

}  // namespace shardkit
