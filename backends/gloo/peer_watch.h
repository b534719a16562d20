// PeerWatch: fails a Gloo payload exchange at once when a peer it involves goes away.
//
// Gloo (2022 snapshot) does not wake a receive pending on a peer whose process died, so without
// this such a rank waits for its deadline (60 s by default). While an exchange waits, a thread
// watches the control mesh connections of the exchange's peers (poll with POLLRDHUP: no reads, no
// busy loop); when one of them vanishes (no parting marker: killed, crashed) or gives up on this
// call or an earlier one, it calls the exchange's abort function (Gloo's abortWaitRecv/
// abortWaitSend) and records the departure. A peer that said goodbye, or gave up on a later call,
// has finished its part of this one: it is left alone, the data it sent may still be in flight.
// Looking is SocketMesh::Departures, so a peer seen to vanish is also noted by the mesh as the
// cause its Close will send on. Peers with no mesh connection (a rank keeps mesh connections only
// to its agreement-tree peers) are watched by their Gloo pairs' sockets instead (ClosedSockets):
// such a connection that ends with nothing left unread is a kConnectionClosed departure; the
// exchange then gives its buffers a short grace to complete (the peer may have sent its part and
// left) before failing (GlooCommunicator::FinishAfterClose).
#ifndef SHARDKIT_BACKENDS_GLOO_PEER_WATCH_H_
#define SHARDKIT_BACKENDS_GLOO_PEER_WATCH_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "backends/socket_mesh/socket_mesh.h"

namespace shardkit::gloo_backend {

// The peers among `sockets` (peer, descriptor of its Gloo pair's socket) whose connection has
// ended (the peer's end closed, or Gloo closed the socket on seeing that) with nothing left
// unread: they have sent all they ever will. Departures of kind kConnectionClosed. Only looks.
std::vector<SocketMesh::Departure> ClosedSockets(const std::vector<std::pair<int, int>>& sockets);

class PeerWatch {
 public:
  explicit PeerWatch(const SocketMesh& mesh);
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;
  ~PeerWatch();

  // Watches `peers` during call `call` until Disarm; `abort` runs at most once, on the watch
  // thread, under the watch's lock (so never after Disarm has returned). Starts the thread on
  // first use; does nothing after Stop.
  // `sockets` are (peer, descriptor) of peers that have no mesh connection, watched by another
  // connection to them (their Gloo pair's socket, lazy_context.h): one that ends (the peer's end
  // closed, or Gloo closed it) with nothing left unread is a kConnectionClosed departure.
  void Arm(std::vector<int> peers, uint64_t call, std::function<void()> abort,
           std::vector<std::pair<int, int>> sockets = {});
  // Stops watching. Returns the departure that aborted the exchange, if one did (for a peer that
  // gave up, with the cause its marker named; SocketMesh::DescribeDeparture words it).
  std::optional<SocketMesh::Departure> Disarm();
  // Ends the thread for good (later Arms watch nothing); the mesh may then be closed.
  void Stop();
  // This rank's program abandons its call (Communicator::Abort): runs the armed exchange's
  // `abort` now, on the calling thread, and every later Arm's at once. Any thread.
  void Interrupt();

 private:
  void Run();

  const SocketMesh& mesh_;
  const int stop_fd_;  // eventfd: wakes the thread out of its look when the watch is destroyed
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                          // guarded by mu_
  uint64_t generation_ = 0;                    // guarded by mu_; changes on every Arm and Disarm
  bool armed_ = false;                         // guarded by mu_
  std::vector<int> peers_;                     // guarded by mu_
  std::vector<std::pair<int, int>> sockets_;   // guarded by mu_
  uint64_t call_ = 0;                          // guarded by mu_
  std::function<void()> abort_;                // guarded by mu_
  std::optional<SocketMesh::Departure> lost_;  // guarded by mu_
  bool interrupted_ = false;                   // guarded by mu_
  std::thread thread_;
};

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_PEER_WATCH_H_
