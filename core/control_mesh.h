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
#ifndef SHARDKIT_CORE_CONTROL_MESH_H_
#define SHARDKIT_CORE_CONTROL_MESH_H_

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/store.h"

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
  // Says goodbye to every peer (one byte after the last message) and closes the connections.
  ~ControlMesh();

  // Writes every send and reads every receive (messages between two ranks arrive in order and
  // both sides agree on their sizes) until `deadline`.
  // Errors (the mesh is then unusable; Close it): kDeadlineExceeded or kUnavailable, naming the
  // first peer not done, the peers not heard from and the bytes moved each way.
  [[nodiscard]] absl::Status Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                      absl::Time deadline);

  // A peer whose connection has ended, and how: it closed its communicator (goodbye), it gave up
  // after an error of its own (Close), or it vanished without a word (killed, crashed, exited
  // without closing its communicator).
  struct Departure {
    enum class How { kVanished, kGaveUp, kGoodbye };
    int peer;
    How how;
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

  // After a failure: resets every connection, so that peers waiting on this rank fail at once and
  // those that already read this rank's message of the failed exchange fail too (a "gave up"
  // byte follows it). Later Exchanges fail with kFailedPrecondition.
  void Close() noexcept;

 private:
  class Transfers;

  explicit ControlMesh(std::vector<int> fds) : fds_(std::move(fds)) {}
  // Exchange's steps; `current` is the peer being served, for errors.
  absl::Status PollUntilDone(Transfers& transfers, absl::Time deadline, int& current) const;
  absl::Status CheckNoneGaveUp(std::span<const int> peers, int& current) const;
  // How the stream of a connection whose peer has left ended (its last unread byte).
  static Departure::How HowItEnded(int fd);

  std::vector<int> fds_;  // [peer]; -1 for this rank
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_CONTROL_MESH_H_
