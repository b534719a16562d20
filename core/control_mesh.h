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
  ~ControlMesh();

  // Writes every send and reads every receive (messages between two ranks arrive in order and
  // both sides agree on their sizes) until `deadline`.
  // Errors (the mesh is then unusable; Close it): kDeadlineExceeded or kUnavailable, naming the
  // first peer not done, the peers not heard from and the bytes moved each way.
  [[nodiscard]] absl::Status Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                      absl::Time deadline);

  // The peers whose connection has ended (they exited or closed their communicator), without
  // waiting; empty while all are alive.
  std::vector<int> ClosedPeers() const;

  // Resets every connection, so that peers fail at once, even those that have not yet read what
  // this rank sent before giving up. Later Exchanges fail with kFailedPrecondition.
  void Close() noexcept;

 private:
  ControlMesh(int rank, std::vector<int> fds) : rank_(rank), fds_(std::move(fds)) {}

  const int rank_;
  std::vector<int> fds_;  // [peer]; -1 for this rank
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_CONTROL_MESH_H_
