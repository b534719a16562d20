// TCP sockets under a deadline, for the tcp:// store (core/store) and the control mesh
// (backends/socket_mesh): connecting, listening, accepting, and moving bytes on non-blocking
// sockets. Every socket made here is non-blocking and close-on-exec; connected ones have
// TCP_NODELAY.
//
//   SHARDKIT_ASSIGN_OR_RETURN(os::Fd fd, os::ConnectTcp("10.0.0.5", 29500, deadline));
//   SHARDKIT_RETURN_IF_ERROR(os::SendAll(fd.get(), frame.data(), frame.size(), deadline));
//   SHARDKIT_RETURN_IF_ERROR(os::RecvAll(fd.get(), header, sizeof(header), deadline));
//
// Messages are bare reasons ("Connection refused", "timed out connecting"); callers prefix what
// they were doing (the store's name, "control mesh: connecting to rank 3").
#ifndef SHARDKIT_CORE_OS_SOCKET_H_
#define SHARDKIT_CORE_OS_SOCKET_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/os/fd.h"

namespace shardkit::os {

// kUnavailable "<what>: <strerror(errno)>".
absl::Status SocketError(const std::string& what);

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT); polls at least once, even with the
// deadline passed. Errors: kDeadlineExceeded "timed out <what>" at `deadline`; kUnavailable if
// poll fails.
[[nodiscard]] absl::Status AwaitReady(int fd, short events, absl::Time deadline,
                                      const std::string& what);

// A connected socket to host:port (a name or a numeric address; every address it resolves to is
// tried in turn). Errors: kNotFound if the name does not resolve; kUnavailable if nothing accepts
// (refused, unreachable); kDeadlineExceeded if connecting did not finish by `deadline`.
[[nodiscard]] absl::StatusOr<Fd> ConnectTcp(const std::string& host, int port, absl::Time deadline);

// A listening socket for a server on host:port (port 0: any free port). A loopback host (127.x,
// localhost) is bound as is; any other host must be an address of this machine, and the wildcard
// address is bound so that every interface reaches the server.
// Errors: kNotFound if `host` does not resolve; kInvalidArgument if it is not this machine's;
// kAlreadyExists if the port is in use; kUnavailable for other socket errors.
[[nodiscard]] absl::StatusOr<Fd> ListenTcp(const std::string& host, int port);

// A listening socket on `address` (IPv4 or IPv6; its port is ignored: an ephemeral one is
// chosen), and the numeric address it is bound to.
struct Listener {
  Fd fd;
  std::string host;  // numeric, e.g. "127.0.0.1" or "::1"
  int port = 0;
};
// Errors: kInvalidArgument for another address family; kUnavailable naming the failed call.
[[nodiscard]] absl::StatusOr<Listener> ListenEphemeral(const sockaddr_storage& address,
                                                       int backlog);

// The local port a socket is bound to. Errors: kUnavailable.
[[nodiscard]] absl::StatusOr<int> BoundPort(int fd);

// Accepts one connection by `deadline`. Errors: kDeadlineExceeded "timed out waiting for
// connections"; kUnavailable "accept: …".
[[nodiscard]] absl::StatusOr<Fd> AcceptOne(int listen_fd, absl::Time deadline);

// One non-blocking send / recv: the bytes moved, 0 if the socket is not ready (EAGAIN; EINTR is
// retried). Errors: kUnavailable naming `peer` ("rank 3 reset its connection (…)"); for RecvSome
// also the end of the stream ("rank 3 went away (…)").
[[nodiscard]] absl::StatusOr<size_t> SendSome(int fd, const void* data, size_t size,
                                              const std::string& peer);
[[nodiscard]] absl::StatusOr<size_t> RecvSome(int fd, void* data, size_t size,
                                              const std::string& peer);
// The same, gathering from / scattering into `runs` in order (at most IOV_MAX of them per call).
[[nodiscard]] absl::StatusOr<size_t> SendSome(int fd, std::span<const iovec> runs,
                                              const std::string& peer);
[[nodiscard]] absl::StatusOr<size_t> RecvSome(int fd, std::span<const iovec> runs,
                                              const std::string& peer);

// Sends / receives exactly `size` bytes on a non-blocking socket by `deadline`.
// Errors: kUnavailable if the peer closed the connection ("the connection was closed by the other
// side") or on a socket error (its text); kDeadlineExceeded "timed out sending" / "timed out
// receiving".
[[nodiscard]] absl::Status SendAll(int fd, const void* data, size_t size, absl::Time deadline);
[[nodiscard]] absl::Status RecvAll(int fd, void* data, size_t size, absl::Time deadline);

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_SOCKET_H_
