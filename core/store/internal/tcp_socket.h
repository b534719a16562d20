// Sockets for the tcp:// store (not part of the API): an owning file descriptor, connecting,
// listening, and sending/receiving whole frames (tcp_wire.h) under a deadline.
//
//   SHARDKIT_ASSIGN_OR_RETURN(Fd fd, ConnectTcp("10.0.0.5", 29500, deadline));
//   SHARDKIT_RETURN_IF_ERROR(SendAll(fd.get(), tcp_wire::EncodeFrame(body), deadline));
//   SHARDKIT_ASSIGN_OR_RETURN(std::string reply, RecvFrame(fd.get(), deadline));
//
// Messages are bare reasons ("connection refused"); callers prefix the store's name.
#ifndef SHARDKIT_CORE_STORE_INTERNAL_TCP_SOCKET_H_
#define SHARDKIT_CORE_STORE_INTERNAL_TCP_SOCKET_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardkit::internal {

// Owns a file descriptor (-1: none); closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A connected, non-blocking TCP socket to host:port (every address the name resolves to is tried).
// Errors: kNotFound if the name does not resolve; kUnavailable if nothing accepts (refused,
// unreachable); kDeadlineExceeded if connecting did not finish by `deadline`.
[[nodiscard]] absl::StatusOr<Fd> ConnectTcp(const std::string& host, int port, absl::Time deadline);

// A non-blocking listening socket for a store served on host:port (port 0: any free port). A
// loopback host (127.x, localhost) is bound as is; any other host must be an address of this
// machine, and the wildcard address is bound so that every interface reaches the store.
// Errors: kNotFound if `host` does not resolve; kInvalidArgument if it is not this machine's;
// kAlreadyExists if the port is in use; kUnavailable for other socket errors.
[[nodiscard]] absl::StatusOr<Fd> ListenTcp(const std::string& host, int port);

// The local port a socket is bound to.
[[nodiscard]] absl::StatusOr<int> BoundPort(int fd);

// Sends every byte of `data` on a non-blocking socket. Errors: kUnavailable if the peer closed the
// connection or on a socket error; kDeadlineExceeded at `deadline`.
[[nodiscard]] absl::Status SendAll(int fd, std::string_view data, absl::Time deadline);

// Receives one frame's body (at most `max_body` bytes). Errors: as SendAll; kDataLoss if the
// frame announces an empty or oversized body.
[[nodiscard]] absl::StatusOr<std::string> RecvFrame(int fd, size_t max_body, absl::Time deadline);

// The message of errno `error` ("Connection refused").
std::string ErrnoText(int error);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_STORE_INTERNAL_TCP_SOCKET_H_
