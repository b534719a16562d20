// ControlMesh: a full mesh of TCP connections between the ranks of one communicator, for the
// small fixed-size control messages of every collective's agreement (headers, verdicts, inline
// AllGather data). Messages are written and read by the calling thread itself with poll(2): no
// helper thread, no hand-off, no rendezvous round per message. Peers that exit are seen at once
// (end of stream), not at the deadline.
//
// Why not the data backend: Gloo's TCP transport moves every message through its device thread
// with a ready-to-receive handshake, and that thread busy-polls while the caller holds a pair
// lock. With more ranks than cores a 128-byte all-to-all took 3-4 ms (a scheduler tick) instead
// of about 0.2 ms; docs/communication.md has the measurements.
//
// Connections: every rank listens on an ephemeral port of the backend's address, publishes
// "<host> <port> <token>" under "<prefix>/mesh/<rank>" in the store, connects to every lower rank
// (sending a hello with its rank and that rank's token) and accepts one connection from every
// higher rank. Connections with a wrong token, rank or magic are dropped and do not count.
#ifndef SHARDKIT_BACKENDS_CONTROL_MESH_CONTROL_MESH_H_
#define SHARDKIT_BACKENDS_CONTROL_MESH_CONTROL_MESH_H_

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/store/store.h"

namespace shardkit {

class ControlMesh {
 public:
  struct Send {
    int peer;
    const void* data;
    size_t size;
  };
  struct Recv {
    int peer;
    void* data;
    size_t size;
  };

  // Collective over `world_size` ranks sharing `store`: listens on `address` (port ignored),
  // connects the mesh by `deadline`. A world of one has no connections.
  // Errors: kDeadlineExceeded naming the ranks not connected; kUnavailable on socket errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ControlMesh>> Connect(
      Store& store, const std::string& key_prefix, int rank, int world_size,
      const sockaddr_storage& address, absl::Time deadline);

  ControlMesh(const ControlMesh&) = delete;
  ControlMesh& operator=(const ControlMesh&) = delete;
  // Says goodbye to every peer (a marker after the last message) and closes the connections.
  ~ControlMesh();

  // Messages are at least this long, so that a peer's parting marker (16 bytes) can never be
  // taken for one.
  static constexpr size_t kMinMessage = 16;

  // Writes every send and reads every receive (messages between two ranks arrive in order and
  // both sides agree on their sizes) until `deadline`. `call` identifies the caller's operation
  // (increasing; the communicator's sequence number): a peer that gave up on this very call fails
  // the exchange even if its message had arrived, one that gave up on a later call does not.
  // Errors (the mesh is then unusable; Close it): kInvalidArgument for a message under
  // kMinMessage bytes; kDeadlineExceeded or kUnavailable, naming the first peer not done, the
  // peers not heard from, the bytes moved each way and how peers that left did.
  [[nodiscard]] absl::Status Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                      absl::Time deadline, uint64_t call = 0);

  // A peer whose connection has ended, and how: it closed its communicator (goodbye), it gave up
  // after an error of its own (Close) during operation `call`, or it vanished without a word
  // (killed, crashed, exited without closing its communicator).
  struct Departure {
    enum class How { kVanished, kGaveUp, kGoodbye };
    int peer;
    How how;
    uint64_t call = 0;  // the last operation it started (kGaveUp, kGoodbye)
  };
  // The departures among `peers`, waiting up to `wait` for the first one, or until
  // `interrupt_fd` (if >= 0) is readable. Only looks (poll, MSG_PEEK) and never consumes a
  // message, so another thread may call it while an Exchange runs.
  std::vector<Departure> Departures(std::span<const int> peers,
                                    absl::Duration wait = absl::ZeroDuration(),
                                    int interrupt_fd = -1) const;

  // The departures of all peers in words, those that vanished first ("rank 3 went away without
  // closing its communicator (killed or crashed?); ranks 1, 2 gave up after errors of their own");
  // "" if none.
  std::string DescribeDepartures() const;
  // " went away without closing its communicator (killed or crashed?)" and the like, for one
  // rank or several.
  static std::string DescribeHow(Departure::How how, bool one);

  // After a failure: sends every peer a "gave up" marker naming the last call (not where a
  // message was left half written: that would complete it with the marker's bytes) and resets
  // every connection, so that peers waiting on this rank fail at once, and those that have read
  // this rank's message of that call but not yet finished it fail too. Best effort: a peer that
  // finished the call before the marker arrived has finished it. Later Exchanges fail with
  // kFailedPrecondition.
  void Close() noexcept;

 private:
  class Transfers;

  explicit ControlMesh(std::vector<int> fds);
  // Exchange's steps; `current` is the peer being served, for errors.
  absl::Status PollUntilDone(Transfers& transfers, absl::Time deadline, int& current);
  absl::Status CheckNoneGaveUp(std::span<const int> peers, uint64_t call, int& current) const;
  // How the connection to `peer`, whose stream has ended, ended: a marker consumed by an
  // Exchange, or the one at the end of the unread bytes.
  Departure HowItEnded(int peer) const;
  // Sends `kind`'s marker to every peer whose stream is at a message boundary.
  void SendMarkers(char kind) noexcept;

  std::vector<int> fds_;                  // [peer]; -1 for this rank and after Close
  std::vector<bool> half_written_;        // [peer]: a failed Exchange left a send half written
  std::vector<std::atomic<char>> heard_;  // [peer]: kind of a marker an Exchange consumed, or 0
  uint64_t call_ = 0;                     // the last Exchange's call
};

}  // namespace shardkit

#endif  // SHARDKIT_BACKENDS_CONTROL_MESH_CONTROL_MESH_H_
