#include "backends/control_mesh/internal/socket_util.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/deadline.h"

namespace shardkit::internal {
namespace {

void SetNoDelay(int fd) {
  int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

// Waits until `fd` is ready for `events`. kDeadlineExceeded at the deadline.
absl::Status AwaitReady(int fd, short events, absl::Time deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return SocketError(absl::StrCat("poll while ", what));
    if (ready == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    }
  }
}

// kUnavailable for errno on the connection to `peer`; a reset (ECONNRESET, EPIPE) says what it
// means.
absl::Status ConnectionError(const std::string& peer) {
  if (errno == ECONNRESET || errno == EPIPE) {
    return absl::UnavailableError(
        absl::StrCat(peer, " reset its connection (it failed or gave up on the operation)"));
  }
  return SocketError(absl::StrCat("connection to ", peer));
}

}  // namespace

absl::Status SocketError(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::StatusOr<Listener> Listen(const sockaddr_storage& address, int backlog) {
  sockaddr_storage bind_to = address;
  socklen_t length = sizeof(sockaddr_in);
  if (bind_to.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&bind_to)->sin6_port = 0;
    length = sizeof(sockaddr_in6);
  } else if (bind_to.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&bind_to)->sin_port = 0;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("control mesh: unsupported address family ", bind_to.ss_family));
  }
  Listener listener;
  listener.fd = ::socket(bind_to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener.fd < 0) return SocketError("control mesh: socket");
  auto fail = [&](const char* what) {
    absl::Status status = SocketError(absl::StrCat("control mesh: ", what));
    ::close(listener.fd);
    return status;
  };
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&bind_to), length) != 0) return fail("bind");
  if (::listen(listener.fd, backlog) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  if (::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
    return fail("getsockname");
  }
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&bound), bound_length, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return fail("getnameinfo");
  }
  listener.host = host;
  listener.port = std::atoi(port);
  return listener;
}

absl::StatusOr<int> Dial(const std::string& host, int port, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad address ", host, ":", port, ": ", ::gai_strerror(rc)));
  }
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  absl::Status status = fd < 0 ? SocketError("socket") : absl::OkStatus();
  const std::string what = absl::StrCat("connecting to ", host, ":", port);
  if (status.ok() && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    status = errno == EINPROGRESS ? AwaitReady(fd, POLLOUT, deadline, what) : SocketError(what);
    int error = 0;
    socklen_t length = sizeof(error);
    if (status.ok() && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error)) {
      errno = error;
      status = SocketError(what);
    }
  }
  ::freeaddrinfo(found);
  if (!status.ok()) {
    if (fd >= 0) ::close(fd);
    return status;
  }
  SetNoDelay(fd);
  return fd;
}

absl::StatusOr<int> AcceptOne(int listen_fd, absl::Time deadline) {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      SetNoDelay(fd);
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SocketError("control mesh: accept");
    if (absl::Status s = AwaitReady(listen_fd, POLLIN, deadline, "waiting for connections");
        !s.ok()) {
      return s;
    }
  }
}

absl::StatusOr<size_t> SendSome(int fd, const void* data, size_t size, const std::string& peer) {
  for (;;) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno != EINTR) return ConnectionError(peer);
  }
}

absl::StatusOr<size_t> RecvSome(int fd, void* data, size_t size, const std::string& peer) {
  for (;;) {
    const ssize_t n = ::recv(fd, data, size, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(
          peer, " went away (its connection ended without a goodbye: killed or crashed?)"));
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno != EINTR) return ConnectionError(peer);
  }
}

absl::Status WriteAll(int fd, const void* data, size_t size, absl::Time deadline) {
  for (size_t done = 0; done < size;) {
    absl::StatusOr<size_t> n =
        SendSome(fd, static_cast<const char*>(data) + done, size - done, "the peer");
    if (!n.ok()) return n.status();
    if (*n == 0) {
      if (absl::Status s = AwaitReady(fd, POLLOUT, deadline, "writing"); !s.ok()) return s;
    }
    done += *n;
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t size, absl::Time deadline) {
  for (size_t done = 0; done < size;) {
    absl::StatusOr<size_t> n =
        RecvSome(fd, static_cast<char*>(data) + done, size - done, "the peer");
    if (!n.ok()) return n.status();
    if (*n == 0) {
      if (absl::Status s = AwaitReady(fd, POLLIN, deadline, "reading"); !s.ok()) return s;
    }
    done += *n;
  }
  return absl::OkStatus();
}

}  // namespace shardkit::internal
