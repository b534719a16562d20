#include "core/store/internal/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/store/internal/tcp_wire.h"

namespace shardkit::internal {
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
sockaddr_storage WithPort(const addrinfo& info, int port, bool wildcard) {
  sockaddr_storage out{};
  std::memcpy(&out, info.ai_addr, info.ai_addrlen);
  if (info.ai_family == AF_INET) {
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

// Waits for `events` on `fd`. Errors: kDeadlineExceeded at `deadline`; kUnavailable on errors.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {  // Polls at least once, even with the deadline passed.
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    pollfd p{fd, events, 0};
    const int rc = ::poll(
        &p, 1,
        static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
    if (rc > 0) return absl::OkStatus();
    if (rc == 0 && left == absl::ZeroDuration()) return absl::DeadlineExceededError("timed out");
    if (rc < 0 && errno != EINTR) return absl::UnavailableError(ErrnoText(errno));
  }
}

absl::StatusOr<Fd> ConnectOne(const addrinfo& info, absl::Time deadline) {
  Fd fd = NewSocket(info.ai_family);
  if (fd.get() < 0) return absl::UnavailableError(ErrnoText(errno));
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd.get(), info.ai_addr, info.ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) return absl::UnavailableError(ErrnoText(errno));
  if (absl::Status ready = WaitFor(fd.get(), POLLOUT, deadline); !ready.ok()) return ready;
  int error = 0;
  socklen_t size = sizeof(error);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size);
  if (error != 0) return absl::UnavailableError(ErrnoText(error));
  return fd;
}

absl::Status RecvExact(int fd, char* out, size_t size, absl::Time deadline) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, out + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError("the connection was closed by the other side");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (absl::Status ready = WaitFor(fd, POLLIN, deadline); !ready.ok()) return ready;
    } else if (errno != EINTR) {
      return absl::UnavailableError(ErrnoText(errno));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string ErrnoText(int error) { return std::strerror(error); }

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
    const sockaddr_storage addr = WithPort(a, 0, /*wildcard=*/false);
    if (::bind(probe.get(), reinterpret_cast<const sockaddr*>(&addr), a.ai_addrlen) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("host \"", host, "\" is not an address of this machine (", ErrnoText(errno),
                       "): the store is served by the process holding rank 0"));
    }
  }
  Fd fd = NewSocket(a.ai_family);
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_storage addr = WithPort(a, port, /*wildcard=*/!loopback);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), a.ai_addrlen) != 0) {
    const int error = errno;
    const std::string text = absl::StrCat("cannot listen on port ", port, ": ", ErrnoText(error));
    if (error == EADDRINUSE) return absl::AlreadyExistsError(text);
    return absl::UnavailableError(text);
  }
  if (::listen(fd.get(), 128) != 0) return absl::UnavailableError(ErrnoText(errno));
  return fd;
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

absl::Status SendAll(int fd, std::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (absl::Status ready = WaitFor(fd, POLLOUT, deadline); !ready.ok()) return ready;
    } else if (errno != EINTR) {
      return absl::UnavailableError(ErrnoText(errno));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RecvFrame(int fd, size_t max_body, absl::Time deadline) {
  char header[tcp_wire::kHeaderBytes];
  if (absl::Status s = RecvExact(fd, header, sizeof(header), deadline); !s.ok()) return s;
  const uint32_t size = tcp_wire::DecodeLength(std::string_view(header, sizeof(header)));
  if (size == 0 || size > max_body) {
    return absl::DataLossError(absl::StrCat("a reply announces ", size, " bytes (at most ",
                                            max_body, "): not a shardkit tcp store"));
  }
  std::string body(size, '\0');
  if (absl::Status s = RecvExact(fd, body.data(), size, deadline); !s.ok()) return s;
  return body;
}

}  // namespace shardkit::internal
