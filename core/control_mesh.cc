#include "core/control_mesh.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/internal/socket_util.h"

namespace shardkit {
namespace {

using internal::PollTimeoutMs;
using internal::SocketError;

std::string RankName(int rank) { return absl::StrCat("rank ", rank); }

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

// The transfers of one Exchange: how far each send and receive has got.
class Transfers {
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
      absl::StatusOr<size_t> n = internal::SendSome(
          fd, static_cast<const char*>(s.data) + sent_[i], s.size - sent_[i], RankName(peer));
      if (!n.ok() || *n == 0) return n.status();
      sent_[i] += *n;
    }
    return absl::OkStatus();
  }
  absl::Status PumpRecvs(int peer, int fd) {
    for (int i = PendingRecv(peer); i >= 0; i = PendingRecv(peer)) {
      const ControlMesh::Recv& r = recvs_[i];
      absl::StatusOr<size_t> n = internal::RecvSome(
          fd, static_cast<char*>(r.data) + received_[i], r.size - received_[i], RankName(peer));
      if (!n.ok() || *n == 0) return n.status();
      received_[i] += *n;
    }
    return absl::OkStatus();
  }

  // "not heard from rank 2, sends to rank 3 not confirmed (received 128 of 384 bytes, sent …)".
  std::string Describe() const {
    std::vector<int> silent, unsent;
    size_t received = 0, expected = 0, sent = 0, to_send = 0;
    for (size_t i = 0; i < recvs_.size(); ++i) {
      expected += recvs_[i].size;
      received += received_[i];
      if (received_[i] < recvs_[i].size) silent.push_back(recvs_[i].peer);
    }
    for (size_t i = 0; i < sends_.size(); ++i) {
      to_send += sends_[i].size;
      sent += sent_[i];
      if (sent_[i] < sends_[i].size) unsent.push_back(sends_[i].peer);
    }
    std::vector<std::string> parts;
    if (!silent.empty()) parts.push_back("not heard from " + RankList(silent));
    if (!unsent.empty()) parts.push_back("sends to " + RankList(unsent) + " not confirmed");
    if (parts.empty()) parts.push_back("every transfer was confirmed");
    return absl::StrCat(absl::StrJoin(parts, ", "), " (received ", received, " of ", expected,
                        " bytes, sent ", sent, " of ", to_send, " bytes)");
  }

 private:
  std::span<const ControlMesh::Send> sends_;
  std::span<const ControlMesh::Recv> recvs_;
  std::vector<size_t> sent_, received_;
};

}  // namespace

ControlMesh::~ControlMesh() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

absl::Status ControlMesh::Exchange(std::span<const Send> sends, std::span<const Recv> recvs,
                                   absl::Time deadline) {
  Transfers transfers(sends, recvs);
  for (const Send& s : sends) {
    if (fds_[s.peer] < 0) return absl::FailedPreconditionError("the control mesh is closed");
  }
  for (const Recv& r : recvs) {
    if (fds_[r.peer] < 0) return absl::FailedPreconditionError("the control mesh is closed");
  }
  int current = -1;  // the peer being served, for errors
  auto fail = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("peer ", current, ": ", status.message(), "; ",
                                                    transfers.Describe()));
  };
  for (const Send& s : sends) {
    current = s.peer;
    if (absl::Status st = transfers.PumpSends(s.peer, fds_[s.peer]); !st.ok()) return fail(st);
  }
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
    const int timeout_ms = PollTimeoutMs(deadline);
    const int ready = ::poll(polled.data(), polled.size(), timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return fail(SocketError("poll"));
    if (ready == 0 && absl::Now() >= deadline) {
      return fail(absl::DeadlineExceededError("timed out waiting for control messages"));
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      current = peers[i];
      // A reset (the peer failed) outranks whatever it sent before: never complete with it.
      absl::Status st = (polled[i].revents & POLLERR) ? internal::PendingError(polled[i].fd,
                                                                              RankName(current))
                                                     : absl::OkStatus();
      if (st.ok()) st = transfers.PumpRecvs(current, polled[i].fd);
      if (st.ok()) st = transfers.PumpSends(current, polled[i].fd);
      if (!st.ok()) return fail(st);
    }
  }
}

std::vector<int> ControlMesh::ClosedPeers() const {
  std::vector<pollfd> polled;
  std::vector<int> peers;
  for (int peer = 0; peer < static_cast<int>(fds_.size()); ++peer) {
    if (fds_[peer] < 0) continue;
    polled.push_back({fds_[peer], POLLRDHUP, 0});
    peers.push_back(peer);
  }
  std::vector<int> closed;
  if (polled.empty() || ::poll(polled.data(), polled.size(), 0) <= 0) return closed;
  for (size_t i = 0; i < polled.size(); ++i) {
    if (polled[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) closed.push_back(peers[i]);
  }
  return closed;
}

void ControlMesh::Close() noexcept {
  for (int& fd : fds_) {
    if (fd < 0) continue;
    // An abortive close (RST): peers fail on it at once, even with earlier messages unread.
    const linger abort_on_close{1, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
    ::close(fd);
    fd = -1;
  }
}

}  // namespace shardkit
