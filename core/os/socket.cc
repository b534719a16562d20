#include "core/os/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/deadline.h"
#include "core/base/status_macros.h"

namespace shardkit::os {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfo> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = absl::StrCat(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot resolve host \"", host, "\": ", gai_strerror(rc)));
  }
  return AddrInfo(result);
}

bool IsLoopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  return addr->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

// `addr` with its port set to `port` and, if `wildcard`, its address to the family's "any".
sockaddr_storage WithPort(const sockaddr* addr, socklen_t length, int port, bool wildcard) {
  sockaddr_storage out{};
  std::memcpy(&out, addr, length);
  if (addr->sa_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_port = htons(static_cast<uint16_t>(port));
    if (wildcard) in->sin_addr.s_addr = htonl(INADDR_ANY);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    if (wildcard) in6->sin6_addr = in6addr_any;
  }
  return out;
}

Fd NewSocket(int family) {
  return Fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

void SetNoDelay(int fd) {
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

absl::StatusOr<Fd> ConnectOne(const addrinfo& info, absl::Time deadline) {
  Fd fd = NewSocket(info.ai_family);
  if (!fd.valid()) return absl::UnavailableError(ErrnoText(errno));
  SetNoDelay(fd.get());
  if (::connect(fd.get(), info.ai_addr, info.ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) return absl::UnavailableError(ErrnoText(errno));
  if (absl::Status ready = AwaitReady(fd.get(), POLLOUT, deadline, "connecting"); !ready.ok()) {
    return ready;
  }
  int error = 0;
  socklen_t size = sizeof(error);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
  if (error != 0) return absl::UnavailableError(ErrnoText(error));
  return fd;
}

// The length of a sockaddr of `family`, 0 for a family other than IPv4 and IPv6.
socklen_t AddressLength(int family) {
  if (family == AF_INET) return sizeof(sockaddr_in);
  if (family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

// One send or receive (`send`: whether to send), retried on EINTR: the bytes moved (0 at the end of
// a received stream), or -1 with errno set (EAGAIN: not ready).
ssize_t MoveOnce(int fd, void* data, size_t size, bool send) {
  while (true) {
    const ssize_t n = send ? ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT)
                           : ::recv(fd, data, size, MSG_DONTWAIT);
    if (n >= 0 || errno != EINTR) return n;
  }
}

bool WouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK; }

// kUnavailable for errno on the connection to `peer`; a reset (ECONNRESET, EPIPE) says what it
// means.
absl::Status ConnectionError(const std::string& peer) {
  if (errno == ECONNRESET || errno == EPIPE) {
    return absl::UnavailableError(
        absl::StrCat(peer, " reset its connection (it failed or gave up on the operation)"));
  }
  return SocketError(absl::StrCat("connection to ", peer));
}

// SendAll and RecvAll.
absl::Status MoveAll(int fd, char* data, size_t size, absl::Time deadline, bool send) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = MoveOnce(fd, data + done, size - done, send);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0 && !send) {
      return absl::UnavailableError("the connection was closed by the other side");
    } else if (n < 0 && !WouldBlock()) {
      return absl::UnavailableError(ErrnoText(errno));
    } else if (absl::Status ready = AwaitReady(fd, send ? POLLOUT : POLLIN, deadline,
                                               send ? "sending" : "receiving");
               !ready.ok()) {
      return ready;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SocketError(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ErrnoText(errno)));
}

absl::Status AwaitReady(int fd, short events, absl::Time deadline, const std::string& what) {
  while (true) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return SocketError(absl::StrCat("poll while ", what));
    if (ready == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    }
  }
}

absl::StatusOr<Fd> ConnectTcp(const std::string& host, int port, absl::Time deadline) {
  absl::StatusOr<AddrInfo> info = Resolve(host, port);
  if (!info.ok()) return info.status();
  absl::Status last = absl::UnavailableError("no address");
  for (const addrinfo* a = info->get(); a != nullptr; a = a->ai_next) {
    absl::StatusOr<Fd> fd = ConnectOne(*a, deadline);
    if (fd.ok()) return fd;
    last = fd.status();
  }
  return last;
}

absl::StatusOr<Fd> ListenTcp(const std::string& host, int port) {
  absl::StatusOr<AddrInfo> info = Resolve(host, port);
  if (!info.ok()) return info.status();
  const addrinfo& a = **info;
  const bool loopback = IsLoopback(a.ai_addr);
  if (!loopback) {  // Binding the address itself (any port) tells whether it is this machine's.
    Fd probe = NewSocket(a.ai_family);
    const sockaddr_storage addr = WithPort(a.ai_addr, a.ai_addrlen, 0, /*wildcard=*/false);
    if (::bind(probe.get(), reinterpret_cast<const sockaddr*>(&addr), a.ai_addrlen) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("host \"", host, "\" is not an address of this machine (", ErrnoText(errno),
                       "): the store is served by the process holding rank 0"));
    }
  }
  Fd fd = NewSocket(a.ai_family);
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_storage addr = WithPort(a.ai_addr, a.ai_addrlen, port, /*wildcard=*/!loopback);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), a.ai_addrlen) != 0) {
    const int error = errno;
    const std::string text = absl::StrCat("cannot listen on port ", port, ": ", ErrnoText(error));
    if (error == EADDRINUSE) return absl::AlreadyExistsError(text);
    return absl::UnavailableError(text);
  }
  if (::listen(fd.get(), 128) != 0) return absl::UnavailableError(ErrnoText(errno));
  return fd;
}

absl::StatusOr<Listener> ListenEphemeral(const sockaddr_storage& address, int backlog) {
  const socklen_t length = AddressLength(address.ss_family);
  if (length == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported address family ", address.ss_family));
  }
  const sockaddr_storage bind_to =
      WithPort(reinterpret_cast<const sockaddr*>(&address), length, 0, /*wildcard=*/false);
  Listener listener;
  listener.fd = NewSocket(address.ss_family);
  if (!listener.fd.valid()) return SocketError("socket");
  const int fd = listener.fd.get();
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&bind_to), length) != 0) {
    return SocketError("bind");
  }
  if (::listen(fd, backlog) != 0) return SocketError("listen");
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
    return SocketError("getsockname");
  }
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&bound), bound_length, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return SocketError("getnameinfo");
  }
  listener.host = host;
  listener.port = std::atoi(port);
  return listener;
}

absl::StatusOr<int> BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t size = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    return absl::UnavailableError(ErrnoText(errno));
  }
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
}

absl::StatusOr<Fd> AcceptOne(int listen_fd, absl::Time deadline) {
  while (true) {
    Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.valid()) {
      SetNoDelay(fd.get());
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (!WouldBlock()) return SocketError("accept");
    SHARDKIT_RETURN_IF_ERROR(AwaitReady(listen_fd, POLLIN, deadline, "waiting for connections"));
  }
}

namespace {

// What one send moved (`n`, errno set where it is -1), as SendSome says.
absl::StatusOr<size_t> Sent(ssize_t n, const std::string& peer) {
  if (n >= 0) return static_cast<size_t>(n);
  if (WouldBlock()) return 0;
  return ConnectionError(peer);
}

// What one receive moved, as RecvSome says.
absl::StatusOr<size_t> Received(ssize_t n, const std::string& peer) {
  if (n > 0) return static_cast<size_t>(n);
  if (n == 0) {
    return absl::UnavailableError(absl::StrCat(
        peer, " went away (its connection ended without a goodbye: killed or crashed?)"));
  }
  if (WouldBlock()) return 0;
  return ConnectionError(peer);
}

// sendmsg / recvmsg over up to IOV_MAX of `runs`, retried on EINTR.
ssize_t MoveOnceV(int fd, std::span<const iovec> runs, bool send) {
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(runs.data());
  message.msg_iovlen = std::min<size_t>(runs.size(), IOV_MAX);
  while (true) {
    const ssize_t n = send ? ::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT)
                           : ::recvmsg(fd, &message, MSG_DONTWAIT);
    if (n >= 0 || errno != EINTR) return n;
  }
}

}  // namespace

absl::StatusOr<size_t> SendSome(int fd, const void* data, size_t size, const std::string& peer) {
  return Sent(MoveOnce(fd, const_cast<void*>(data), size, /*send=*/true), peer);
}

absl::StatusOr<size_t> RecvSome(int fd, void* data, size_t size, const std::string& peer) {
  return Received(MoveOnce(fd, data, size, /*send=*/false), peer);
}

absl::StatusOr<size_t> SendSome(int fd, std::span<const iovec> runs, const std::string& peer) {
  return Sent(MoveOnceV(fd, runs, /*send=*/true), peer);
}

absl::StatusOr<size_t> RecvSome(int fd, std::span<const iovec> runs, const std::string& peer) {
  return Received(MoveOnceV(fd, runs, /*send=*/false), peer);
}

absl::Status SendAll(int fd, const void* data, size_t size, absl::Time deadline) {
  return MoveAll(fd, static_cast<char*>(const_cast<void*>(data)), size, deadline, /*send=*/true);
}

absl::Status RecvAll(int fd, void* data, size_t size, absl::Time deadline) {
  return MoveAll(fd, static_cast<char*>(data), size, deadline, /*send=*/false);
}

}  // namespace shardkit::os
