// Words for ranks in error messages, shared by the core and the backends so that every message
// names ranks the same way.
#ifndef SHARDKIT_CORE_BASE_RANK_TEXT_H_
#define SHARDKIT_CORE_BASE_RANK_TEXT_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardkit {

// "rank 4", "ranks 0, 2", "ranks 0-3, 5, 7-9" (ascending input; runs of three or more as a-b).
std::string FormatRanks(std::span<const int> ranks);

// One "<ranks>: <message>" per distinct message, ordered by the lowest rank that reported it:
// {"ranks 0-2: disk full", "rank 3: bad shape"}. `messages` is (rank, message), ranks ascending.
std::vector<std::string> GroupsByMessage(
    std::span<const std::pair<int, std::string_view>> messages);

// GroupsByMessage joined by "; ": "ranks 0-2: disk full; rank 3: bad shape".
std::string GroupByMessage(std::span<const std::pair<int, std::string_view>> messages);

// How far a failed exchange had got, for its error.
struct TransferProgress {
  std::vector<int> silent;  // peers whose data did not fully arrive
  std::vector<int> unsent;  // peers whose sends were not confirmed
  size_t received = 0, expected = 0, sent = 0, to_send = 0;

  // One message from / to `peer` of `size` bytes, of which `done` were moved.
  void AddRecv(int peer, size_t size, size_t done) {
    expected += size;
    received += done;
    if (done < size) silent.push_back(peer);
  }
  void AddSend(int peer, size_t size, size_t done) {
    to_send += size;
    sent += done;
    if (done < size) unsent.push_back(peer);
  }

  // The peers still waited on: silent, then unsent.
  std::vector<int> waited_on() const {
    std::vector<int> peers = silent;
    peers.insert(peers.end(), unsent.begin(), unsent.end());
    return peers;
  }

  // "not heard from rank 2, sends to rank 3 not confirmed (received 128 of 384 bytes, sent 128
  // of 384 bytes)", or "every transfer was confirmed (…)".
  std::string ToString() const;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_RANK_TEXT_H_
