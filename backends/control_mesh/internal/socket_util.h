// Small POSIX socket helpers for ControlMesh: statuses from errno, deadlines as poll timeouts,
// listening, dialling and whole-buffer I/O on non-blocking sockets.
#ifndef SHARDKIT_BACKENDS_CONTROL_MESH_INTERNAL_SOCKET_UTIL_H_
#define SHARDKIT_BACKENDS_CONTROL_MESH_INTERNAL_SOCKET_UTIL_H_

#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardkit::internal {

// kUnavailable "<what>: <strerror(errno)>".
absl::Status SocketError(const std::string& what);

// A non-blocking listening socket and its numeric address.
struct Listener {
  int fd = -1;
  std::string host;  // numeric, e.g. "127.0.0.1" or "::1"
  int port = 0;
};
// Listens on `address` with an ephemeral port. The caller closes listener.fd.
absl::StatusOr<Listener> Listen(const sockaddr_storage& address, int backlog);

// A connected non-blocking TCP socket (TCP_NODELAY) to host:port, by `deadline`.
absl::StatusOr<int> Dial(const std::string& host, int port, absl::Time deadline);

// Accepts one connection (non-blocking, TCP_NODELAY) by `deadline`. kDeadlineExceeded on timeout.
absl::StatusOr<int> AcceptOne(int listen_fd, absl::Time deadline);

// One non-blocking send / recv: the bytes moved, 0 if the socket is not ready (EAGAIN; EINTR is
// retried). Errors: kUnavailable, naming `peer`; for RecvSome also the end of the stream.
absl::StatusOr<size_t> SendSome(int fd, const void* data, size_t size, const std::string& peer);
absl::StatusOr<size_t> RecvSome(int fd, void* data, size_t size, const std::string& peer);

// Writes / reads exactly `size` bytes on a non-blocking socket by `deadline`.
absl::Status WriteAll(int fd, const void* data, size_t size, absl::Time deadline);
absl::Status ReadAll(int fd, void* data, size_t size, absl::Time deadline);

}  // namespace shardkit::internal

#endif  // SHARDKIT_BACKENDS_CONTROL_MESH_INTERNAL_SOCKET_UTIL_H_
