#include "core/control_mesh.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/internal/rank_text.h"
#include "core/internal/socket_util.h"
#include "core/status_macros.h"

namespace shardkit {
namespace {

using internal::PollTimeoutMs;
using internal::SocketError;

// The last byte a rank sends every peer: when it closes its mesh normally (see Departures), and
// when it gives up after a failure (see Close).
constexpr char kGoodbye = 'G';
constexpr char kGaveUp = 'A';
// Unread control data beyond this is not a departure's last word (a few messages at most are).
constexpr int kMaxUnreadLook = 64 << 10;

std::string RankName(int rank) { return absl::StrCat("rank ", rank); }

// What a peer's last byte before the end of its stream says, or "" if it is no last word.
std::string LastWord(int peer, char byte) {
  if (byte == kGoodbye) {
    return absl::StrCat(RankName(peer),
                        " closed its communicator (it is not taking part in this operation)");
  }
  if (byte == kGaveUp) {
    return absl::StrCat(RankName(peer), " gave up on this operation (see its own error)");
  }
  return "";
}

}  // namespace

// The transfers of one Exchange: how far each send and receive has got.
class ControlMesh::Transfers {
 public:
  Transfers(std::span<const ControlMesh::Send> sends, std::span<const ControlMesh::Recv> recvs)
      : sends_(sends), recvs_(recvs), sent_(sends.size()), received_(recvs.size()) {}

  // The first unfinished send / receive with `peer` (messages of a pair go in order), or -1.
  int PendingSend(int peer) const {
    for (size_t i = 0; i < sends_.size(); ++i) {
      if (sends_[i].peer == peer && sent_[i] < sends_[i].size) return static_cast<int>(i);
    }
    return -1;
  }
  int PendingRecv(int peer) const {
    for (size_t i = 0; i < recvs_.size(); ++i) {
      if (recvs_[i].peer == peer && received_[i] < recvs_[i].size) return static_cast<int>(i);
    }
    return -1;
  }

  // Writes to / reads from `fd` what it takes without blocking. Errors: kUnavailable.
  absl::Status PumpSends(int peer, int fd) {
    for (int i = PendingSend(peer); i >= 0; i = PendingSend(peer)) {
      const ControlMesh::Send& s = sends_[i];
      absl::StatusOr<size_t> n = internal::SendSome(fd, static_cast<const char*>(s.data) + sent_[i],
                                                    s.size - sent_[i], RankName(peer));
      if (!n.ok() || *n == 0) return n.status();
      sent_[i] += *n;
    }
    return absl::OkStatus();
  }
  absl::Status PumpRecvs(int peer, int fd) {
    for (int i = PendingRecv(peer); i >= 0; i = PendingRecv(peer)) {
      const ControlMesh::Recv& r = recvs_[i];
      absl::StatusOr<size_t> n = internal::RecvSome(fd, static_cast<char*>(r.data) + received_[i],
                                                    r.size - received_[i], RankName(peer));
      if (!n.ok() && received_[i] == 1) {
        // The stream ended right after one byte: a last word, not the start of a message.
        const std::string last_word = LastWord(peer, *static_cast<const char*>(r.data));
        if (!last_word.empty()) {
          received_[i] = 0;
          return absl::UnavailableError(last_word);
        }
      }
      if (!n.ok() || *n == 0) return n.status();
      received_[i] += *n;
    }
    return absl::OkStatus();
  }

  // What had been moved, for errors.
  internal::TransferProgress Progress() const {
    internal::TransferProgress progress;
    for (size_t i = 0; i < recvs_.size(); ++i) {
      progress.AddRecv(recvs_[i].peer, recvs_[i].size, received_[i]);
    }
    for (size_t i = 0; i < sends_.size(); ++i) {
      progress.AddSend(sends_[i].peer, sends_[i].size, sent_[i]);
    }
    return progress;
  }

 private:
  std::span<const ControlMesh::Send> sends_;
  std::span<const ControlMesh::Recv> recvs_;
  std::vector<size_t> sent_, received_;
};

ControlMesh::~ControlMesh() {
  for (int fd : fds_) {
    if (fd < 0) continue;
    (void)::send(fd, &kGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
  }
}

absl::Status ControlMesh::Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                   absl::Time deadline) {
  std::vector<int> peers;
  for (const Send& s : sends) peers.push_back(s.peer);
  for (const Recv& r : recvs) peers.push_back(r.peer);
  for (int peer : peers) {
    if (fds_[peer] < 0) return absl::FailedPreconditionError("the control mesh is closed");
  }
  Transfers transfers(sends, recvs);
  int current = -1;  // the peer being served, for errors
  absl::Status status;
  for (const Send& s : sends) {
    current = s.peer;
    status = transfers.PumpSends(s.peer, fds_[s.peer]);
    if (!status.ok()) break;
  }
  if (status.ok()) status = PollUntilDone(transfers, deadline, current);
  if (status.ok()) status = CheckNoneGaveUp(peers, current);
  if (status.ok()) return status;
  const std::string departures = DescribeDepartures();
  return absl::Status(status.code(), absl::StrCat("peer ", current, ": ", status.message(), "; ",
                                                  transfers.Progress().ToString(),
                                                  departures.empty() ? "" : "; ", departures));
}

absl::Status ControlMesh::PollUntilDone(Transfers& transfers, absl::Time deadline,
                                        int& current) const {
  std::vector<pollfd> polled;
  std::vector<int> peers;
  for (;;) {
    polled.clear();
    peers.clear();
    for (int peer = 0; peer < static_cast<int>(fds_.size()); ++peer) {
      const short events = static_cast<short>((transfers.PendingRecv(peer) >= 0 ? POLLIN : 0) |
                                              (transfers.PendingSend(peer) >= 0 ? POLLOUT : 0));
      if (events == 0) continue;
      polled.push_back({fds_[peer], events, 0});
      peers.push_back(peer);
    }
    if (polled.empty()) return absl::OkStatus();
    current = peers.front();
    const int ready = ::poll(polled.data(), polled.size(), PollTimeoutMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return SocketError("poll");
    if (ready == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("timed out waiting for control messages");
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      current = peers[i];
      // Messages queued before a reset are still read; the reset shows once they are consumed.
      SHARDKIT_RETURN_IF_ERROR(transfers.PumpRecvs(current, polled[i].fd));
      SHARDKIT_RETURN_IF_ERROR(transfers.PumpSends(current, polled[i].fd));
    }
  }
}

absl::Status ControlMesh::CheckNoneGaveUp(std::span<const int> peers, int& current) const {
  for (const Departure& d : Departures(peers)) {
    char next = 0;
    if (::recv(fds_[d.peer], &next, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && next == kGaveUp) {
      current = d.peer;
      return absl::UnavailableError(LastWord(d.peer, next));
    }
  }
  return absl::OkStatus();
}

std::vector<ControlMesh::Departure> ControlMesh::Departures(std::span<const int> peers,
                                                            absl::Duration wait,
                                                            int interrupt_fd) const {
  std::vector<pollfd> polled;
  std::vector<int> polled_peers;
  for (int peer : peers) {
    if (peer < 0 || peer >= static_cast<int>(fds_.size()) || fds_[peer] < 0) continue;
    polled.push_back({fds_[peer], POLLRDHUP, 0});
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
    if (!(polled[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
    departed.push_back({polled_peers[i], HowItEnded(polled[i].fd)});
  }
  return departed;
}

ControlMesh::Departure::How ControlMesh::HowItEnded(int fd) {
  // The last word is the last unread byte: messages the peer sent before it may still be unread.
  int unread = 0;
  if (::ioctl(fd, FIONREAD, &unread) != 0 || unread < 1 || unread > kMaxUnreadLook) {
    return Departure::How::kVanished;
  }
  std::vector<char> bytes(static_cast<size_t>(unread));
  const ssize_t n = ::recv(fd, bytes.data(), bytes.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n != unread) return Departure::How::kVanished;
  if (bytes.back() == kGoodbye) return Departure::How::kGoodbye;
  if (bytes.back() == kGaveUp) return Departure::How::kGaveUp;
  return Departure::How::kVanished;
}

std::string ControlMesh::DescribeDepartures() const {
  using How = Departure::How;
  std::vector<int> everyone(fds_.size());
  for (size_t peer = 0; peer < fds_.size(); ++peer) everyone[peer] = static_cast<int>(peer);
  std::map<How, std::vector<int>> by_how;  // ordered: vanished first
  for (const Departure& d : Departures(everyone)) by_how[d.how].push_back(d.peer);
  std::vector<std::string> parts;
  for (const auto& [how, ranks] : by_how) {
    parts.push_back(absl::StrCat(internal::RankList(ranks), DescribeHow(how, ranks.size() == 1)));
  }
  return absl::StrJoin(parts, "; ");
}

std::string ControlMesh::DescribeHow(Departure::How how, bool one) {
  switch (how) {
    case Departure::How::kVanished:
      return one ? " went away without closing its communicator (killed or crashed?)"
                 : " went away without closing their communicators (killed or crashed?)";
    case Departure::How::kGaveUp:
      return one ? " gave up after an error of its own" : " gave up after errors of their own";
    case Departure::How::kGoodbye:
      return one ? " has closed its communicator" : " have closed their communicators";
  }
  return " left";
}

void ControlMesh::Close() noexcept {
  for (int& fd : fds_) {
    if (fd < 0) continue;
    // Tells peers that already hold this rank's message of the failed exchange not to complete
    // with it (CheckNoneGaveUp), then resets: peers still waiting fail at once.
    (void)::send(fd, &kGaveUp, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    const linger abort_on_close{1, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
    ::close(fd);
    fd = -1;
  }
}

}  // namespace shardkit
