// StallSearch: after an exchange reached its deadline with no peer seen to leave, which rank
// stopped making progress. A stalled rank (stopped by SIGSTOP or a debugger, or stuck in the
// caller's code) neither leaves nor gives up, so only the ranks waiting on it directly could name
// it, and ranks waiting on those would name their own peer. Instead, every rank that times out
// writes whom it was waiting on to the store ("<prefix>/waiting/<rank>"), then follows such
// records from its own peers for up to a grace: the rank the records lead to that wrote none is
// the one that stalled. Every rank reaches the same one, whatever its place in the chain.
#ifndef SHARDKIT_CORE_COMM_STALL_SEARCH_H_
#define SHARDKIT_CORE_COMM_STALL_SEARCH_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/store/store.h"

namespace shardkit {

// How long a rank follows the records, for an exchange that had `budget` until its deadline: a
// tenth of it, between 50 and 500 ms (longer than the ranks' deadlines differ by: they come from
// the same call, started at about the same time).
absl::Duration StallGrace(absl::Duration budget);

// Writes this rank's record (`waited_on`: the peers it was still waiting on), then returns the
// lowest rank the records lead to that wrote none within `grace`, or -1 if they lead nowhere
// (every rank reached wrote one) or the store fails.
int FindStalledRank(Store& store, const std::string& key_prefix, int rank,
                    const std::vector<int>& waited_on, absl::Duration grace);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_STALL_SEARCH_H_
