// SocketMesh's connections: Connect publishes the listener's address in the store, EnsureConnected
// dials and accepts peers on demand (see socket_mesh.h).
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "backends/socket_mesh/socket_mesh.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"
#include "core/os/socket.h"

namespace shardkit {
namespace {

constexpr uint32_t kHelloMagic = 0x53484b4d;  // "SHKM"
// A connection that does not say hello within this time is dropped (a stray client).
constexpr absl::Duration kHelloTimeout = absl::Seconds(2);
// How long one wait for a connection may block before it looks for an Interrupt.
constexpr absl::Duration kInterruptSlice = absl::Milliseconds(100);
// How long AdoptPending waits for the hellos of connections already in the listen backlog.
constexpr absl::Duration kPendingHelloGrace = absl::Milliseconds(50);

struct Hello {
  uint32_t magic = kHelloMagic;
  int32_t rank = -1;
  uint64_t token = 0;  // the listening rank's, from the store: proves the dialler read it there
};

std::string Key(const std::string& prefix, int rank) {
  return absl::StrCat(prefix, "/mesh/", rank);
}

uint64_t RandomToken() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// One peer's published "<host> <port> <token>".
struct PeerAddress {
  std::string host;
  int port = 0;
  uint64_t token = 0;
};

absl::StatusOr<PeerAddress> ParseAddress(const std::string& value, int peer) {
  std::vector<std::string> parts = absl::StrSplit(value, ' ');
  PeerAddress address;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &address.port) ||
      !absl::SimpleAtoi(parts[2], &address.token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "control mesh: rank ", peer, " published a malformed address \"", value, "\""));
  }
  address.host = parts[0];
  return address;
}

}  // namespace

SocketMesh::SocketMesh(Store& store, std::string key_prefix, int rank, int world_size)
    : store_(store),
      key_prefix_(std::move(key_prefix)),
      rank_(rank),
      fds_(world_size),
      half_written_(world_size),
      heard_(world_size),
      heard_cause_(world_size) {
  for (std::atomic<int>& fd : fds_) fd.store(-1);
  for (std::atomic<int>& cause : heard_cause_) cause.store(-1);
  interrupt_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

absl::StatusOr<std::unique_ptr<SocketMesh>> SocketMesh::Connect(Store& store,
                                                                const std::string& key_prefix,
                                                                int rank, int world_size,
                                                                const sockaddr_storage& address,
                                                                absl::Time /*deadline*/) {
  // Owns the listener from the start, so that every error path closes it.
  std::unique_ptr<SocketMesh> mesh(new SocketMesh(store, key_prefix, rank, world_size));
  if (world_size == 1) return mesh;
  // Every peer may dial before this rank accepts: the backlog holds them all.
  absl::StatusOr<os::Listener> listener =
      os::ListenEphemeral(address, std::max(world_size, SOMAXCONN));
  if (!listener.ok()) return Annotate(listener.status(), "control mesh");
  mesh->listen_fd_ = listener->fd.release();
  mesh->token_ = RandomToken();
  SHARDKIT_RETURN_IF_ERROR(store.Set(
      Key(key_prefix, rank), absl::StrCat(listener->host, " ", listener->port, " ", mesh->token_)));
  return mesh;
}

absl::Status SocketMesh::EnsureConnected(std::span<const int> peers, absl::Time deadline) {
  if (closed_) return absl::FailedPreconditionError("the control mesh is closed");
  if (interrupted()) return absl::CancelledError("interrupted");
  std::vector<int> higher;
  for (int peer : peers) {
    if (peer < 0 || peer >= world_size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("control mesh: rank ", rank_,
                                                     " cannot connect to peer ", peer,
                                                     " (world of ", world_size(), ")"));
    }
  }
  // All dials first: they complete into the peers' backlogs without waiting for their accepts.
  for (int peer : peers) {
    if (fds_[peer].load() >= 0) continue;
    if (peer > rank_) {
      higher.push_back(peer);
      continue;
    }
    SHARDKIT_RETURN_IF_ERROR(DialPeer(peer, deadline));
  }
  return AcceptUntilConnected(higher, deadline);
}

int SocketMesh::connections() const {
  int connected = 0;
  for (const std::atomic<int>& fd : fds_) connected += fd.load() >= 0 ? 1 : 0;
  return connected;
}

bool SocketMesh::connected(int peer) const {
  return peer >= 0 && peer < static_cast<int>(fds_.size()) && fds_[peer].load() >= 0;
}

absl::Status SocketMesh::DialPeer(int peer, absl::Time deadline) {
  absl::StatusOr<std::string> value = store_.Get(Key(key_prefix_, peer), deadline - absl::Now());
  if (!value.ok()) {
    return Annotate(value.status(),
                    absl::StrCat("control mesh: rank ", peer, " did not publish its address"));
  }
  SHARDKIT_ASSIGN_OR_RETURN(PeerAddress address, ParseAddress(*value, peer));
  const std::string what = absl::StrCat("control mesh: connecting to rank ", peer, " at ",
                                        address.host, ":", address.port);
  absl::StatusOr<os::Fd> fd = os::ConnectTcp(address.host, address.port, deadline);
  if (!fd.ok()) return Annotate(fd.status(), what);
  const Hello hello{kHelloMagic, rank_, address.token};
  if (absl::Status s = os::SendAll(fd->get(), &hello, sizeof(hello), deadline); !s.ok()) {
    return Annotate(s, what);
  }
  fds_[peer].store(fd->release());
  return absl::OkStatus();
}

absl::Status SocketMesh::AcceptUntilConnected(std::span<const int> awaited, absl::Time deadline) {
  auto absent = [&] {
    std::set<int> ranks;
    for (int peer : awaited) {
      if (fds_[peer].load() < 0) ranks.insert(peer);
    }
    return std::vector<int>(ranks.begin(), ranks.end());
  };
  for (std::vector<int> missing = absent(); !missing.empty(); missing = absent()) {
    // In slices, so that an Interrupt is noticed within one.
    absl::StatusOr<os::Fd> fd =
        os::AcceptOne(listen_fd_, std::min(deadline, absl::Now() + kInterruptSlice));
    if (interrupted()) return absl::CancelledError("interrupted while waiting for connections");
    if (!fd.ok() && absl::IsDeadlineExceeded(fd.status()) && absl::Now() < deadline) continue;
    if (!fd.ok()) {
      return Annotate(fd.status(), absl::StrCat("control mesh: ", FormatRanks(missing),
                                                " did not connect to rank ", rank_));
    }
    AdoptIfValid(fd->release(), std::min(deadline, absl::Now() + kHelloTimeout));
  }
  return absl::OkStatus();
}

void SocketMesh::AdoptIfValid(int fd, absl::Time deadline) {
  Hello hello;
  const bool valid = os::RecvAll(fd, &hello, sizeof(hello), deadline).ok() &&
                     hello.magic == kHelloMagic && hello.token == token_ && hello.rank > rank_ &&
                     hello.rank < world_size() && fds_[hello.rank].load() < 0;
  if (valid) {
    fds_[hello.rank].store(fd);
  } else {
    ::close(fd);
  }
}

void SocketMesh::AdoptPending() noexcept {
  if (listen_fd_ < 0) return;
  // Their hellos were sent with the handshake: a short grace covers one still in flight.
  const absl::Time grace = absl::Now() + kPendingHelloGrace;
  for (;;) {
    absl::StatusOr<os::Fd> fd = os::AcceptOne(listen_fd_, absl::Now());
    if (!fd.ok()) return;
    AdoptIfValid(fd->release(), grace);
  }
}

void SocketMesh::CloseSockets(bool abortive) noexcept {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  for (std::atomic<int>& entry : fds_) {
    const int fd = entry.exchange(-1);
    if (fd < 0) continue;
    if (abortive) {
      // An abortive close (RST): peers still waiting on this rank fail at once.
      const linger abort_on_close{1, 0};
      (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
    }
    ::close(fd);
  }
}

}  // namespace shardkit
