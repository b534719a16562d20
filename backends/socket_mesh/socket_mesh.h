// SocketMesh: a mesh of TCP connections between the ranks of one communicator. Gloo runs two:
// the control mesh, for the small fixed-size control messages of every collective's agreement
// (headers, verdicts, inline AllGather data), and the payload mesh, for the bytes of the segment
// rounds (backends/gloo/mesh_payload.h). Messages are written and read by the calling thread itself
// with poll(2): no helper thread, no hand-off, no rendezvous round per message. Connected peers
// that exit are seen at once (end of stream), not at the deadline.
//
// Why not the data backend: Gloo's TCP transport moves every message through its device thread
// with a ready-to-receive handshake, and that thread busy-polls while the caller holds a pair
// lock. With more ranks than cores a 128-byte all-to-all took 3-4 ms (a scheduler tick) instead
// of about 0.2 ms; docs/communication.md has the measurements.
//
// Connections: made on demand. Connect only listens on an ephemeral port of the backend's address
// (for the mesh's life) and publishes "<host> <port> <token>" under "<prefix>/mesh/<rank>" in the
// store. EnsureConnected (and so every Exchange, for the peers of its messages, before it moves
// any) dials each lower-ranked peer not yet connected (reading its address from the store once,
// and sending a hello with its rank and that rank's token), then accepts from each higher-ranked
// one. Dialling never waits for the peer's accept (the kernel completes the handshake into the
// listen backlog, sized for the world), so two ranks that need each other cannot deadlock; a
// higher rank that dials early, for a later exchange, is accepted and kept. A rank thus holds only
// the connections its exchanges need (its agreement-tree peers: O(log n)). Connections with a wrong
// token, rank or magic are dropped and do not count. A peer never connected takes no part in
// anything below (markers, departures); one that exits before connecting is seen as a refused
// dial (lower rank) or only at the deadline (higher rank, "did not connect").
//
// Causes: when a rank is killed, only the peers connected to it see it vanish; they give up and
// Close, their "gave up" markers fail their own peers, and so on (a cascade). So that distant ranks
// still learn which rank died, a gave-up marker carries its cause: the first rank this mesh saw
// vanish (in an Exchange or Departures), or the cause named by a gave-up marker it met, or the one
// given to Close. Errors and descriptions then say "rank 5 gave up on operation 7 after rank 3 went
// away without closing its communicator (killed or crashed?)".
#ifndef SHARDKIT_BACKENDS_SOCKET_MESH_CONTROL_MESH_H_
#define SHARDKIT_BACKENDS_SOCKET_MESH_CONTROL_MESH_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/comm/culprit.h"
#include "core/store/store.h"

namespace shardkit {
namespace internal {
struct MeshMarker;
}  // namespace internal

class SocketMesh {
 public:
  // A message is `size` bytes at `data`, or gathered from / scattered into `runs` in order (then
  // `size` is their total and `data` the first run's, which must hold kMinMessage bytes: a
  // parting marker is looked for there). Runs let the Gloo backend write a strided piece of weight
  // sync without packing it (sendmsg gathers it in the kernel's own copy).
  struct Send {
    int peer;
    const void* data;
    size_t size;
    std::span<const iovec> runs = {};
  };
  struct Recv {
    int peer;
    void* data;
    size_t size;
    std::span<const iovec> runs = {};
  };

  // One of `world_size` ranks sharing `store` (which must outlive the mesh): listens on `address`
  // (port ignored) and publishes its address; connects nothing (see EnsureConnected). A world of
  // one neither listens nor publishes. `deadline` is unused (kept for callers).
  // Errors: kUnavailable on socket errors; the store's on publishing.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SocketMesh>> Connect(
      Store& store, const std::string& key_prefix, int rank, int world_size,
      const sockaddr_storage& address, absl::Time deadline);

  SocketMesh(const SocketMesh&) = delete;
  SocketMesh& operator=(const SocketMesh&) = delete;
  // Says goodbye to every connected peer (a marker after the last message), including those whose
  // connection was waiting in the listen backlog, and closes the connections and the listener.
  ~SocketMesh();

  // Connects to every peer in `peers` (other ranks of the world; repeats allowed) not yet
  // connected, by `deadline`: dials the lower ranks, then accepts from the higher ones, keeping
  // accepted connections of ranks not in `peers` for later. Collective in pairs: each listed peer
  // must list this rank too, in an EnsureConnected or Exchange of its own.
  // Errors: kInvalidArgument for a peer outside the world or this rank; kFailedPrecondition after
  // Close; kDeadlineExceeded "control mesh: rank(s) … did not connect to rank …" naming the higher
  // peers not connected; a failed dial or store read names its peer.
  [[nodiscard]] absl::Status EnsureConnected(std::span<const int> peers, absl::Time deadline);

  // Close's cause for a peer whose connection of another transport closed before its part arrived
  // (kConnectionClosed): `peer | kClosedCause`.
  static constexpr int kClosedCause = 1 << 23;
  // Close's cause for a peer that stopped making progress (stalled: see the Gloo backend's
  // stall search): `peer | kStalledCause`.
  static constexpr int kStalledCause = 1 << 22;
  // Close's cause for this rank when its program abandoned the call (Interrupt, then Close):
  // `rank | kInterruptedCause`.
  static constexpr int kInterruptedCause = 1 << 21;
  // The first cause this mesh noted (as the markers of Close carry it), or -1.
  int cause() const { return cause_.load(); }
  // The rank a cause (Close's `cause`, a marker's) names and how; nullopt for -1.
  static std::optional<Culprit> CulpritOf(int cause);
  // The peers the last failed Exchange was still waiting on: messages from them had not fully
  // arrived, or messages to them had not been fully written.
  const std::vector<int>& waited_on() const { return waited_on_; }

  // How many peers are connected now; whether `peer` is.
  int connections() const;
  bool connected(int peer) const;

  // Messages are at least this long, so that a peer's parting marker (16 bytes) can never be
  // taken for one.
  static constexpr size_t kMinMessage = 16;

  // Connects the peers of `sends` and `recvs` (EnsureConnected), then writes every send and reads
  // every receive (messages between two ranks arrive in order and
  // both sides agree on their sizes) until `deadline`. `call` identifies the caller's operation
  // (increasing; the communicator's sequence number): a peer that gave up on this very call fails
  // the exchange even if its message had arrived, one that gave up on a later call does not.
  // Errors (the mesh is then unusable; Close it): kInvalidArgument for a message under
  // kMinMessage bytes; EnsureConnected's; kDeadlineExceeded or kUnavailable, naming the first peer
  // not done, the peers not heard from, the bytes moved each way and how peers that left did.
  [[nodiscard]] absl::Status Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                      absl::Time deadline, uint64_t call = 0);

  // A peer whose connection has ended, and how: it closed its communicator (goodbye), it gave up
  // after an error (Close) during operation `call`, or it vanished without a word (killed,
  // crashed, exited without closing its communicator). kConnectionClosed is never reported by the
  // mesh: it is what a watch of another transport's connection (the Gloo backend's peer watch)
  // reports for a peer it has no mesh connection to, whose connection ended before its part of
  // an exchange arrived (it went away or gave up; that connection cannot say which).
  struct Departure {
    enum class How { kVanished, kGaveUp, kGoodbye, kConnectionClosed };
    int peer;
    How how;
    uint64_t call = 0;  // the last operation it started (kGaveUp, kGoodbye)
    // kGaveUp: the rank whose vanishing made it give up, from its marker; -1 if not known (an
    // error of its own, or one it could not trace to a rank).
    int cause = -1;
  };
  // The departures among the connected `peers` (one never connected has not departed), waiting up
  // to `wait` for the first one, or until `interrupt_fd` (if >= 0) is readable. Only looks (poll,
  // MSG_PEEK) and never consumes a message, so another thread may call it while an Exchange runs.
  // Notes the first cause it meets (a peer that vanished, a gave-up marker's cause) for Close.
  std::vector<Departure> Departures(std::span<const int> peers,
                                    absl::Duration wait = absl::ZeroDuration(),
                                    int interrupt_fd = -1) const;

  // The departures of all connected peers in words, those that vanished first, peers that gave up
  // grouped by cause ("rank 3 went away without closing its communicator (killed or crashed?);
  // ranks 1, 2 gave up after errors of their own; rank 4 gave up after rank 0 went away without
  // closing its communicator (killed or crashed?)"); "" if none.
  std::string DescribeDepartures() const;
  // " went away without closing its communicator (killed or crashed?)" and the like, for one
  // rank or several (without a cause).
  static std::string DescribeHow(Departure::How how, bool one);
  // One departure in words: "rank 5 went away without closing its communicator (killed or
  // crashed?)", "rank 5 gave up after rank 3 went away without closing its communicator (killed or
  // crashed?)", "rank 5 gave up after an error of its own", "rank 5 has closed its communicator".
  static std::string DescribeDeparture(const Departure& d);

  // Makes the Exchange or EnsureConnected running on another thread, and every later one, fail
  // at once with kCancelled ("interrupted"): the caller's program abandons the call (then Closes
  // the mesh, with its cause). Any thread; async-signal-unsafe only in that it may be called
  // while a call runs. Idempotent.
  void Interrupt() noexcept;
  bool interrupted() const { return interrupted_.load(); }

  // After a failure: sends every connected peer (and each whose connection waits in the listen
  // backlog) a "gave up" marker naming the last call (not where a message was left half written:
  // that would complete it with the marker's bytes), resets every connection and closes the
  // listener (later dials to this rank are refused), so that peers waiting on this rank fail at
  // once, and those that have read this rank's message of that call but not yet finished it fail
  // too. Best effort: a peer that finished the call before the marker arrived has finished it.
  // The markers carry the cause this mesh noted first (see Causes above), else `cause` (the rank
  // the caller saw vanish, e.g. a payload peer, or `peer | kClosedCause` for one whose connection
  // of another transport closed; -1: none). Later Exchanges fail with
  // kFailedPrecondition. `between_calls`: this rank finished its last call and gives up before the
  // next one (Communicator::Abort with no call in flight): the markers name the next call, so that
  // peers still finishing the last one are not failed by them.
  void Close(int cause = -1, bool between_calls = false) noexcept;

 private:
  class Transfers;

  SocketMesh(Store& store, std::string key_prefix, int rank, int world_size);
  // EnsureConnected's steps (connect.cc). Dials `peer` and says hello.
  absl::Status DialPeer(int peer, absl::Time deadline);
  // Accepts until every rank in `awaited` (higher ranks) is connected.
  absl::Status AcceptUntilConnected(std::span<const int> awaited, absl::Time deadline);
  // Keeps accepted connection `fd` if its hello (read by `deadline`) proves a higher rank not yet
  // connected; closes it otherwise.
  void AdoptIfValid(int fd, absl::Time deadline);
  // Adopts the connections already waiting in the listen backlog, without waiting for more.
  void AdoptPending() noexcept;
  // Closes the listener (queued connections are reset) and every connection.
  void CloseSockets(bool abortive) noexcept;

  // Exchange's steps; `current` is the peer being served, for errors.
  absl::Status PollUntilDone(Transfers& transfers, absl::Time deadline, int& current);
  // An Exchange consumed `peer`'s parting marker instead of a message.
  void Heard(int peer, const internal::MeshMarker& marker) noexcept;
  absl::Status CheckNoneGaveUp(std::span<const int> peers, uint64_t call, int& current) const;
  // How the connection `fd` to `peer`, whose stream has ended, ended: a marker consumed by an
  // Exchange, or the one at the end of the unread bytes.
  Departure HowItEnded(int peer, int fd) const;
  // Sends `kind`'s marker, naming call call_ + `after`, to every connected peer whose stream is at
  // a message boundary.
  void SendMarkers(char kind, uint64_t after = 0) noexcept;
  // Keeps `cause` (if >= 0) as cause_ unless one is kept already.
  void NoteCause(int cause) const noexcept;
  // A gave-up marker from `peer` naming `cause`: kept as NoteCause does, and also in place of a
  // cause noted because `peer` itself seemed to vanish (its connection was seen to end, by the
  // watch's thread, between this thread consuming the marker and recording it): a peer that
  // sent a marker did not vanish.
  void NoteMarkerCause(int peer, int cause) const noexcept;
  int world_size() const { return static_cast<int>(fds_.size()); }

  // Thread-safety: Departures (and DescribeDepartures, connections) may run on another thread
  // while Exchange connects peers. fds_ is sized once, at construction, and an entry only ever
  // changes by an atomic store of one int, so a concurrent reader sees each peer either not yet
  // connected (-1) or connected, never a half-updated vector; a mutex would have to be held across
  // Departures' poll, or be dropped around it for the same per-entry snapshot. heard_,
  // heard_cause_, call_ and cause_ are atomics read (cause_ also noted) by Departures. Everything
  // else is touched by the Exchange / Close / destructor thread only.
  Store& store_;
  const std::string key_prefix_;
  const int rank_;
  int listen_fd_ = -1;  // -1 for a world of one and after Close
  uint64_t token_ = 0;  // this rank's, published: a dialler's hello must carry it
  bool closed_ = false;
  std::vector<std::atomic<int>> fds_;     // [peer]; -1 for this rank, unconnected, after Close
  std::vector<bool> half_written_;        // [peer]: a failed Exchange left a send half written
  std::vector<int> waited_on_;            // see waited_on()
  std::vector<std::atomic<char>> heard_;  // [peer]: kind of a marker an Exchange consumed, or 0
  std::vector<std::atomic<int>> heard_cause_;  // [peer]: that marker's cause (stored before heard_)
  std::atomic<uint64_t> call_ = 0;             // the last Exchange's call
  // The first cause noted (a peer seen to vanish, a gave-up marker's cause, Close's), or -1.
  // Mutable: Departures, a look, notes it (atomically: it may run on another thread).
  mutable std::atomic<int> cause_ = -1;
  // Interrupt: the flag, and an eventfd the waits poll beside their sockets (readable for good).
  std::atomic<bool> interrupted_ = false;
  int interrupt_fd_ = -1;
};

}  // namespace shardkit

#endif  // SHARDKIT_BACKENDS_SOCKET_MESH_CONTROL_MESH_H_
