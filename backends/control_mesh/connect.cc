// ControlMesh::Connect: the mesh's rendezvous through the store (see control_mesh.h).
#include <unistd.h>

#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "backends/control_mesh/control_mesh.h"
#include "backends/control_mesh/internal/socket_util.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"

namespace shardkit {
namespace {

constexpr uint32_t kHelloMagic = 0x53484b4d;  // "SHKM"
// A connection that does not say hello within this time is dropped (a stray client).
constexpr absl::Duration kHelloTimeout = absl::Seconds(2);

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

// Connects to every lower rank and says hello with its token.
absl::Status DialLower(Store& store, const std::string& prefix, int rank, absl::Time deadline,
                       std::vector<int>& fds) {
  for (int peer = 0; peer < rank; ++peer) {
    absl::StatusOr<std::string> value = store.Get(Key(prefix, peer), deadline - absl::Now());
    if (!value.ok()) {
      return Annotate(value.status(),
                      absl::StrCat("control mesh: rank ", peer, " did not publish its address"));
    }
    SHARDKIT_ASSIGN_OR_RETURN(PeerAddress address, ParseAddress(*value, peer));
    const std::string what = absl::StrCat("control mesh: connecting to rank ", peer);
    absl::StatusOr<int> fd = internal::Dial(address.host, address.port, deadline);
    if (!fd.ok()) return Annotate(fd.status(), what);
    fds[peer] = *fd;
    const Hello hello{kHelloMagic, rank, address.token};
    SHARDKIT_RETURN_IF_ERROR(
        Annotate(internal::WriteAll(*fd, &hello, sizeof(hello), deadline), what));
  }
  return absl::OkStatus();
}

// Accepts one connection from every higher rank; drops connections that do not prove they belong.
absl::Status AcceptHigher(int listen_fd, int rank, int world_size, uint64_t token,
                          absl::Time deadline, std::vector<int>& fds) {
  int missing = world_size - 1 - rank;
  while (missing > 0) {
    absl::StatusOr<int> fd = internal::AcceptOne(listen_fd, deadline);
    if (!fd.ok()) {
      std::vector<int> absent;
      for (int peer = rank + 1; peer < world_size; ++peer) {
        if (fds[peer] < 0) absent.push_back(peer);
      }
      return Annotate(fd.status(), absl::StrCat("control mesh: ", FormatRanks(absent),
                                                " did not connect to rank ", rank));
    }
    Hello hello;
    const bool valid = internal::ReadAll(*fd, &hello, sizeof(hello),
                                         std::min(deadline, absl::Now() + kHelloTimeout))
                           .ok() &&
                       hello.magic == kHelloMagic && hello.token == token && hello.rank > rank &&
                       hello.rank < world_size && fds[hello.rank] < 0;
    if (!valid) {
      ::close(*fd);
      continue;
    }
    fds[hello.rank] = *fd;
    --missing;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControlMesh>> ControlMesh::Connect(Store& store,
                                                                  const std::string& key_prefix,
                                                                  int rank, int world_size,
                                                                  const sockaddr_storage& address,
                                                                  absl::Time deadline) {
  // Owns the sockets from the start, so that every error path closes them.
  std::unique_ptr<ControlMesh> mesh(new ControlMesh(std::vector<int>(world_size, -1)));
  if (world_size == 1) return mesh;
  SHARDKIT_ASSIGN_OR_RETURN(internal::Listener listener, internal::Listen(address, world_size));
  const uint64_t token = RandomToken();
  absl::Status status =
      store.Set(Key(key_prefix, rank), absl::StrCat(listener.host, " ", listener.port, " ", token));
  if (status.ok()) status = DialLower(store, key_prefix, rank, deadline, mesh->fds_);
  if (status.ok()) {
    status = AcceptHigher(listener.fd, rank, world_size, token, deadline, mesh->fds_);
  }
  ::close(listener.fd);
  if (!status.ok()) {
    mesh->Close();  // peers connected so far learn that this rank gave up, not that it left
    return status;
  }
  return mesh;
}

}  // namespace shardkit
