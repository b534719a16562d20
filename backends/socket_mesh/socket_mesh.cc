#include "backends/socket_mesh/socket_mesh.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "backends/socket_mesh/internal/mesh_marker.h"
#include "core/base/deadline.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"
#include "core/os/socket.h"

namespace shardkit {
namespace {

using internal::kMeshMarkerSize;
using internal::MeshMarker;
using os::SocketError;

// Unread control data beyond this is not looked through for a parting marker (a few messages at
// most are ever unread).
constexpr int kMaxUnreadLook = 64 << 10;

static_assert(SocketMesh::kClosedCause == MeshMarker::kClosedFlag);
static_assert(SocketMesh::kStalledCause == MeshMarker::kStalledFlag);
static_assert(SocketMesh::kInterruptedCause == MeshMarker::kInterruptedFlag);

std::string RankName(int rank) { return absl::StrCat("rank ", rank); }

// DescribeHow, or " gave up after rank 3 went away ..." for ranks that gave up with a known cause.
std::string HowWithCause(SocketMesh::Departure::How how, int cause, bool one) {
  if (how == SocketMesh::Departure::How::kGaveUp && cause >= 0) {
    return absl::StrCat(" gave up", internal::DescribeCause(cause));
  }
  return SocketMesh::DescribeHow(how, one);
}

// For one rank that gave up because it was itself interrupted: "rank 1 was interrupted (...)";
// else "".
std::string SelfInterrupted(const std::vector<int>& ranks, SocketMesh::Departure::How how,
                            int cause) {
  if (how != SocketMesh::Departure::How::kGaveUp || ranks.size() != 1 ||
      !internal::InterruptedItself(ranks[0], cause)) {
    return "";
  }
  return DescribeCulprit({ranks[0], Culprit::How::kInterrupted});
}

SocketMesh::Departure::How HowOf(const MeshMarker& marker) {
  return marker.kind == MeshMarker::kGoodbye ? SocketMesh::Departure::How::kGoodbye
                                             : SocketMesh::Departure::How::kGaveUp;
}

// Per peer, the messages of one direction in order: the first unfinished one in O(1), so that an
// exchange with every peer of a large world costs O(world) per poll round, not O(world²).
class PeerQueues {
 public:
  template <typename Message>
  PeerQueues(size_t world_size, std::span<const Message> messages)
      : head_(world_size, -1), next_(messages.size(), -1) {
    for (size_t i = messages.size(); i-- > 0;) {
      next_[i] = head_[messages[i].peer];
      head_[messages[i].peer] = static_cast<int>(i);
    }
  }
  // The index of `peer`'s first unfinished message, or -1.
  int Head(int peer) const { return head_[peer]; }
  // Message `i`, the head of `peer`'s queue, is finished.
  void Pop(int peer, int i) { head_[peer] = next_[i]; }

 private:
  std::vector<int> head_;  // [peer]
  std::vector<int> next_;  // [message]: the peer's message after it, or -1
};

// Where a gathered message has got: the run it is in and the bytes of that run already moved.
struct RunCursor {
  size_t run = 0;
  size_t offset = 0;
};

// The runs from `at` on (the first one shortened by at.offset) into `window`: at most IOV_MAX
// runs and about 4 MiB (more than a socket takes at once), so that copying them stays cheap.
std::span<const iovec> Window(std::span<const iovec> runs, const RunCursor& at,
                              std::vector<iovec>& window) {
  window.clear();
  size_t bytes = 0;
  for (size_t i = at.run; i < runs.size() && window.size() < IOV_MAX && bytes < (4u << 20); ++i) {
    iovec run = runs[i];
    if (i == at.run) {
      run.iov_base = static_cast<char*>(run.iov_base) + at.offset;
      run.iov_len -= at.offset;
    }
    bytes += run.iov_len;
    window.push_back(run);
  }
  return window;
}

// Moves `at` on by `n` bytes.
void Advance(std::span<const iovec> runs, RunCursor& at, size_t n) {
  while (n > 0 && at.run < runs.size()) {
    const size_t step = std::min(n, runs[at.run].iov_len - at.offset);
    at.offset += step;
    n -= step;
    if (at.offset == runs[at.run].iov_len) ++at.run, at.offset = 0;
  }
}

}  // namespace

// The transfers of one Exchange: how far each send and receive has got.
class SocketMesh::Transfers {
 public:
  Transfers(size_t world_size, std::span<const Send> sends, std::span<const Recv> recvs)
      : sends_(sends),
        recvs_(recvs),
        sent_(sends.size()),
        received_(recvs.size()),
        send_at_(sends.size()),
        recv_at_(recvs.size()),
        send_queues_(world_size, sends),
        recv_queues_(world_size, recvs) {
    for (const Send& s : sends) peers_.push_back(s.peer);
    for (const Recv& r : recvs) peers_.push_back(r.peer);
    std::sort(peers_.begin(), peers_.end());
    peers_.erase(std::unique(peers_.begin(), peers_.end()), peers_.end());
  }

  // The peers of this exchange, ascending: a poll round looks at these, not at the whole world.
  const std::vector<int>& peers() const { return peers_; }

  // The first unfinished send / receive with `peer` (messages of a pair go in order), or -1.
  int PendingSend(int peer) const { return send_queues_.Head(peer); }
  int PendingRecv(int peer) const { return recv_queues_.Head(peer); }

  // Writes to `fd` what it takes without blocking. Errors: kUnavailable.
  absl::Status PumpSends(int peer, int fd) {
    for (int i = PendingSend(peer); i >= 0; i = PendingSend(peer)) {
      const Send& s = sends_[i];
      absl::StatusOr<size_t> n =
          s.runs.empty() ? os::SendSome(fd, static_cast<const char*>(s.data) + sent_[i],
                                        s.size - sent_[i], RankName(peer))
                         : os::SendSome(fd, Window(s.runs, send_at_[i], window_), RankName(peer));
      if (!n.ok() || *n == 0) return n.status();
      sent_[i] += *n;
      Advance(s.runs, send_at_[i], *n);
      if (sent_[i] == s.size) send_queues_.Pop(peer, i);
    }
    return absl::OkStatus();
  }

  // Reads from `fd` what it takes without blocking. A parting marker where a message should be
  // is the peer's last word: it is returned in `heard` and fails the exchange.
  // Errors: kUnavailable.
  absl::Status PumpRecvs(int peer, int fd, std::optional<MeshMarker>& heard) {
    for (int i = PendingRecv(peer); i >= 0; i = PendingRecv(peer)) {
      const Recv& r = recvs_[i];
      absl::StatusOr<size_t> n =
          r.runs.empty() ? os::RecvSome(fd, static_cast<char*>(r.data) + received_[i],
                                        r.size - received_[i], RankName(peer))
                         : os::RecvSome(fd, Window(r.runs, recv_at_[i], window_), RankName(peer));
      if (n.ok()) {
        received_[i] += *n;
        Advance(r.runs, recv_at_[i], *n);
      }
      // Where a message starts: its first kMeshMarkerSize bytes, once all read (or all there is).
      const bool ended = !n.ok() || received_[i] == r.size;
      if (ended && received_[i] >= kMeshMarkerSize) {
        const std::optional<MeshMarker> marker = internal::ParseMarker(r.data, kMeshMarkerSize);
        if (marker.has_value() && (!n.ok() || received_[i] == kMeshMarkerSize)) {
          received_[i] = 0;  // not a message
          heard = marker;
          return absl::UnavailableError(internal::DescribeMarker(peer, *marker));
        }
      }
      if (received_[i] == r.size) recv_queues_.Pop(peer, i);
      if (!n.ok() || *n == 0) return n.status();
    }
    return absl::OkStatus();
  }

  // What had been moved, for errors.
  TransferProgress Progress() const {
    TransferProgress progress;
    for (size_t i = 0; i < recvs_.size(); ++i) {
      progress.AddRecv(recvs_[i].peer, recvs_[i].size, received_[i]);
    }
    for (size_t i = 0; i < sends_.size(); ++i) {
      progress.AddSend(sends_[i].peer, sends_[i].size, sent_[i]);
    }
    return progress;
  }

  // Marks the peers to which a message was left half written.
  void MarkHalfWritten(std::vector<bool>& half_written) const {
    for (size_t i = 0; i < sends_.size(); ++i) {
      if (sent_[i] > 0 && sent_[i] < sends_[i].size) half_written[sends_[i].peer] = true;
    }
  }

 private:
  std::span<const Send> sends_;
  std::span<const Recv> recvs_;
  std::vector<size_t> sent_, received_;
  std::vector<RunCursor> send_at_, recv_at_;  // gathered messages only
  std::vector<iovec> window_;                 // scratch for Window
  PeerQueues send_queues_, recv_queues_;
  std::vector<int> peers_;
};

SocketMesh::~SocketMesh() {
  AdoptPending();  // a peer that dialled for a later exchange hears the goodbye too
  SendMarkers(MeshMarker::kGoodbye);
  CloseSockets(/*abortive=*/false);
  if (interrupt_fd_ >= 0) ::close(interrupt_fd_);
}

void SocketMesh::Interrupt() noexcept {
  interrupted_.store(true);
  if (interrupt_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(interrupt_fd_, &one, sizeof(one));
  }
}

absl::Status SocketMesh::Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                  absl::Time deadline, uint64_t call) {
  std::vector<int> peers;
  absl::Status usable;
  auto check = [&](int peer, size_t size, std::span<const iovec> runs) {
    peers.push_back(peer);
    if (!usable.ok()) return;
    if (closed_) usable = absl::FailedPreconditionError("the control mesh is closed");
    size_t total = 0;
    for (const iovec& run : runs) total += run.iov_len;
    if (!runs.empty() && total != size) {
      usable = absl::InvalidArgumentError(absl::StrCat(
          "control mesh: a ", size, "-byte message gathered from runs of ", total, " bytes"));
    } else if (size < kMinMessage || (!runs.empty() && runs[0].iov_len < kMinMessage)) {
      usable = absl::InvalidArgumentError(absl::StrCat(
          "control mesh: a ", size, "-byte message",
          runs.empty() ? "" : absl::StrCat(" whose first run has ", runs[0].iov_len, " bytes"),
          " (the minimum is ", kMinMessage, ")"));
    }
  };
  for (const Send& s : sends) check(s.peer, s.size, s.runs);
  for (const Recv& r : recvs) check(r.peer, r.size, r.runs);
  SHARDKIT_RETURN_IF_ERROR(usable);
  SHARDKIT_RETURN_IF_ERROR(EnsureConnected(peers, deadline));
  call_.store(call);
  Transfers transfers(fds_.size(), sends, recvs);
  int current = -1;  // the peer being served, for errors
  absl::Status status = PollUntilDone(transfers, deadline, current);
  if (status.ok()) status = CheckNoneGaveUp(peers, call, current);
  if (status.ok()) return status;
  transfers.MarkHalfWritten(half_written_);
  const std::string departures = DescribeDepartures();
  const TransferProgress progress = transfers.Progress();
  waited_on_ = progress.waited_on();
  return absl::Status(
      status.code(), absl::StrCat("peer ", current, ": ", status.message(), "; ",
                                  progress.ToString(), departures.empty() ? "" : "; ", departures));
}

absl::Status SocketMesh::PollUntilDone(Transfers& transfers, absl::Time deadline, int& current) {
  std::vector<pollfd> polled;
  std::vector<int> peers;
  for (bool first = true;; first = false) {
    polled.clear();
    peers.clear();
    for (int peer : transfers.peers()) {
      const short events = static_cast<short>((transfers.PendingRecv(peer) >= 0 ? POLLIN : 0) |
                                              (transfers.PendingSend(peer) >= 0 ? POLLOUT : 0));
      if (events == 0) continue;
      polled.push_back({fds_[peer].load(), events, 0});
      peers.push_back(peer);
    }
    if (polled.empty()) return absl::OkStatus();
    current = peers.front();
    if (interrupted()) return absl::CancelledError("interrupted");
    if (interrupt_fd_ >= 0) polled.push_back({interrupt_fd_, POLLIN, 0});  // last: not a peer
    // The first round writes every send at once, without asking whether the sockets have room.
    const int ready = first ? static_cast<int>(peers.size())
                            : ::poll(polled.data(), polled.size(), PollTimeoutMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return SocketError("poll");
    if (ready == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("timed out waiting for control messages");
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      if (!first && polled[i].revents == 0) continue;
      current = peers[i];
      // Messages queued before a reset are still read; the reset shows once they are consumed.
      SHARDKIT_RETURN_IF_ERROR(transfers.PumpSends(current, polled[i].fd));
      if (first) continue;
      std::optional<MeshMarker> heard;
      absl::Status received = transfers.PumpRecvs(current, polled[i].fd, heard);
      if (heard.has_value()) Heard(current, *heard);
      SHARDKIT_RETURN_IF_ERROR(received);
    }
  }
}

void SocketMesh::Heard(int peer, const MeshMarker& marker) noexcept {
  heard_cause_[peer].store(marker.cause);
  heard_[peer].store(marker.kind);
  if (marker.kind == MeshMarker::kGaveUp) NoteMarkerCause(peer, marker.cause);
}

void SocketMesh::NoteCause(int cause) const noexcept {
  int none = -1;
  if (cause >= 0) cause_.compare_exchange_strong(none, cause);
}

void SocketMesh::NoteMarkerCause(int peer, int cause) const noexcept {
  int vanished = peer;  // cause_'s encoding of "peer vanished"
  if (cause >= 0 && !cause_.compare_exchange_strong(vanished, cause)) NoteCause(cause);
}

absl::Status SocketMesh::CheckNoneGaveUp(std::span<const int> peers, uint64_t call,
                                         int& current) const {
  for (const Departure& d : Departures(peers)) {
    // The marker right after the message just read: the peer gave up on this very call.
    char next[kMeshMarkerSize];
    if (::recv(fds_[d.peer].load(), next, sizeof(next), MSG_PEEK | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof(next))) {
      continue;
    }
    const std::optional<MeshMarker> marker = internal::ParseMarker(next, sizeof(next));
    if (marker.has_value() && marker->kind == MeshMarker::kGaveUp && marker->call == call) {
      NoteMarkerCause(d.peer, marker->cause);
      current = d.peer;
      return absl::UnavailableError(internal::DescribeMarker(d.peer, *marker));
    }
  }
  return absl::OkStatus();
}

std::vector<SocketMesh::Departure> SocketMesh::Departures(std::span<const int> peers,
                                                          absl::Duration wait,
                                                          int interrupt_fd) const {
  std::vector<pollfd> polled;
  std::vector<int> polled_peers;
  for (int peer : peers) {
    const int fd = peer >= 0 && peer < world_size() ? fds_[peer].load() : -1;
    if (fd < 0) continue;  // never connected (or closed): it has not departed
    polled.push_back({fd, POLLRDHUP, 0});
    polled_peers.push_back(peer);
  }
  if (interrupt_fd >= 0) polled.push_back({interrupt_fd, POLLIN, 0});
  std::vector<Departure> departed;
  const absl::Time deadline = absl::Now() + wait;
  int ready = 0;
  do {
    ready = ::poll(polled.data(), polled.size(), PollTimeoutMs(deadline));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) return departed;
  for (size_t i = 0; i < polled_peers.size(); ++i) {
    if (polled[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      const Departure& d = departed.emplace_back(HowItEnded(polled_peers[i], polled[i].fd));
      NoteCause(d.how == Departure::How::kVanished ? d.peer : d.cause);
    }
  }
  return departed;
}

SocketMesh::Departure SocketMesh::HowItEnded(int peer, int fd) const {
  if (const char kind = heard_[peer].load(); kind != 0) {
    return {peer, HowOf(MeshMarker{kind}), call_.load(),
            kind == MeshMarker::kGaveUp ? heard_cause_[peer].load() : -1};
  }
  // The parting marker is the last thing a peer sends: messages before it may still be unread.
  int unread = 0;
  if (::ioctl(fd, FIONREAD, &unread) != 0 || unread < static_cast<int>(kMeshMarkerSize) ||
      unread > kMaxUnreadLook) {
    return {peer, Departure::How::kVanished};
  }
  std::vector<char> bytes(static_cast<size_t>(unread));
  if (::recv(fd, bytes.data(), bytes.size(), MSG_PEEK | MSG_DONTWAIT) != unread) {
    return {peer, Departure::How::kVanished};
  }
  const std::optional<MeshMarker> marker =
      internal::ParseMarker(bytes.data() + unread - kMeshMarkerSize, kMeshMarkerSize);
  if (!marker.has_value()) return {peer, Departure::How::kVanished};
  return {peer, HowOf(*marker), marker->call,
          marker->kind == MeshMarker::kGaveUp ? marker->cause : -1};
}

std::string SocketMesh::DescribeDepartures() const {
  using How = Departure::How;
  std::vector<int> everyone(fds_.size());
  for (size_t peer = 0; peer < fds_.size(); ++peer) everyone[peer] = static_cast<int>(peer);
  // Ordered: vanished first; those that gave up, without a cause first, then by cause.
  std::map<std::pair<How, int>, std::vector<int>> by_how;
  for (const Departure& d : Departures(everyone)) by_how[{d.how, d.cause}].push_back(d.peer);
  std::vector<std::string> parts;
  for (const auto& [how, ranks] : by_how) {
    std::string self = SelfInterrupted(ranks, how.first, how.second);
    parts.push_back(!self.empty()
                        ? std::move(self)
                        : absl::StrCat(FormatRanks(ranks),
                                       HowWithCause(how.first, how.second, ranks.size() == 1)));
  }
  return absl::StrJoin(parts, "; ");
}

std::optional<Culprit> SocketMesh::CulpritOf(int cause) {
  if (cause < 0) return std::nullopt;
  return internal::CulpritOfCause(cause);
}

std::string SocketMesh::DescribeDeparture(const Departure& d) {
  if (std::string self = SelfInterrupted({d.peer}, d.how, d.cause); !self.empty()) return self;
  return absl::StrCat(FormatRanks(std::vector<int>{d.peer}), HowWithCause(d.how, d.cause, true));
}

std::string SocketMesh::DescribeHow(Departure::How how, bool one) {
  switch (how) {
    case Departure::How::kVanished:
      return one ? " went away without closing its communicator (killed or crashed?)"
                 : " went away without closing their communicators (killed or crashed?)";
    case Departure::How::kGaveUp:
      return one ? " gave up after an error of its own" : " gave up after errors of their own";
    case Departure::How::kGoodbye:
      return one ? " has closed its communicator" : " have closed their communicators";
    case Departure::How::kConnectionClosed:
      return one ? " went away or gave up: its connection closed before its part arrived"
                 : " went away or gave up: their connections closed before their parts arrived";
  }
  return " left";
}

void SocketMesh::SendMarkers(char kind, uint64_t after) noexcept {
  const int cause = kind == MeshMarker::kGaveUp ? cause_.load() : -1;
  const std::string marker = internal::EncodeMarker(MeshMarker{kind, call_.load() + after, cause});
  for (size_t peer = 0; peer < fds_.size(); ++peer) {
    const int fd = fds_[peer].load();
    if (fd < 0 || half_written_[peer]) continue;
    (void)::send(fd, marker.data(), marker.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void SocketMesh::Close(int cause, bool between_calls) noexcept {
  NoteCause(cause);  // unless a cause was noted already
  AdoptPending();    // a peer that dialled for a later exchange learns that this rank gave up
  SendMarkers(MeshMarker::kGaveUp, between_calls ? 1 : 0);
  // An abortive close (RST): peers still waiting on this rank fail at once.
  CloseSockets(/*abortive=*/true);
  closed_ = true;
}

}  // namespace shardkit
