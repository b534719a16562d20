// The socket descriptor of a connected Gloo pair, for the peer watch (peer_watch.h), which needs
// to see a pair's connection end without a mesh connection to the peer. Gloo keeps a pair's socket
// private, so it is found among the process's descriptors by its addresses: a pair that connected
// actively holds the socket whose remote end is the peer pair's listening address; a passive one
// holds the socket it accepted, whose local end is its own listening address (Gloo closes the
// listening socket once it has accepted). Every pair listens on a port of its own, so the match is
// unique.
#ifndef SHARDKIT_BACKENDS_GLOO_PAIR_SOCKET_H_
#define SHARDKIT_BACKENDS_GLOO_PAIR_SOCKET_H_

#include <sys/socket.h>

#include <vector>

namespace shardkit::gloo_backend {

struct PairEnds {
  sockaddr_storage self{};  // this pair's listening address
  sockaddr_storage peer{};  // the peer pair's listening address
  bool active = false;      // this side connected (Gloo's rule; lazy_context.cc)
};

// For each of `pairs`, the descriptor of its connected socket, or -1 if none matches.
std::vector<int> FindPairSockets(const std::vector<PairEnds>& pairs);

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_PAIR_SOCKET_H_
