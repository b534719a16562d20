#include "backends/gloo/pair_socket.h"

#include <netinet/in.h>
#include <sys/stat.h>

#include <cstring>

#include "core/os/proc_status.h"

namespace shardkit::gloo_backend {
namespace {

// Same family, address and port.
bool SameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port &&
           std::memcmp(&x.sin_addr, &y.sin_addr, sizeof(x.sin_addr)) == 0;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
  }
  return false;
}

// A connected socket's two ends; false for anything else.
bool Ends(int fd, sockaddr_storage& local, sockaddr_storage& remote) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  socklen_t size = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) != 0) return false;
  size = sizeof(remote);
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &size) == 0;
}

}  // namespace

std::vector<int> FindPairSockets(const std::vector<PairEnds>& pairs) {
  std::vector<int> found(pairs.size(), -1);
  (void)os::ForEachOpenFd([&](int fd) {  // unlisted: nothing found
    sockaddr_storage local{}, remote{};
    if (!Ends(fd, local, remote)) return;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const bool match = pairs[i].active ? SameEndpoint(remote, pairs[i].peer)
                                         : SameEndpoint(local, pairs[i].self);
      if (match) found[i] = fd;
    }
  });
  return found;
}

}  // namespace shardkit::gloo_backend
