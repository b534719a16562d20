// LazyContext: a Gloo context whose pairs (one TCP connection each) are made on first use, so a
// rank holds connections only to the ranks it has exchanged payload with. A scatter from one
// root then costs n-1 pairs on the root and 1 on every other rank, instead of n(n-1)/2 in all.
//
//   auto context = std::make_shared<LazyContext>(device, rank, size, store, prefix);
//   SHARDKIT_RETURN_IF_ERROR(context->ConnectPairs(peers, deadline));  // before posting buffers
//   auto buffer = context->createUnboundBuffer(data, size);            // as with any gloo::Context
//
// Why: Gloo's full mesh (rendezvous::Context::connectFullMesh) gives every pair its own listening
// socket on an ephemeral port, so a large world on one host runs out of ports ("bind: Address
// already in use" at 256 ranks), and Debian's Gloo (2022 snapshot) has no lazy context of its own.
//
// Connecting: for the peers without a pair, ConnectPairs first creates all their pairs (each
// listens at once) and publishes each pair's address under "<prefix>/gloo/<self>/<peer>", then
// reads each peer's address for its pair toward this rank and connects. In Gloo's
// tcp::Pair::connect (gloo/transport/tcp/pair.cc) the side whose listening address is the greater
// (IP bytes, then port) connects actively; the other waits until Gloo's device thread has accepted
// the peer's connection. The active side only needs the peer's pair to exist (the kernel completes
// the handshake on its listening socket), which it does before its address is published. So all
// active connects go first, then the passive waits. A passive wait waits only for its peer to reach
// its active connects; those wait for nothing but the addresses of that peer's own peers, which
// every rank publishes before it reads any: no wait cycle. (Each peer must come: the communicator's
// agreement makes every rank of an exchange run it, with the same peers on both sides.)
//
// Deadlines: store reads wait until the deadline (in slices, to notice AbortConnect); Gloo fixes a
// pair's connect timeout when the pair is created and waits 5 times it, so pairs are created with
// a fifth of the time then left. A connect starts only before the deadline, but may end after it
// by the time this rank spent reading addresses (Gloo has no way to shorten a pair's timeout). A
// connect that times out throws "Connect timeout" (kDeadlineExceeded, see gloo_status.h).
//
// Threads: one thread calls ConnectPairs and the buffer functions at a time (the communicator's
// call lock); AbortConnect may be called from another thread (the peer watch) meanwhile. A failed
// ConnectPairs leaves pairs half made: the communicator is poisoned then and closeConnections()
// (gloo::Context's, which closes every pair created so far) ends them.
#ifndef SHARDKIT_BACKENDS_GLOO_LAZY_CONTEXT_H_
#define SHARDKIT_BACKENDS_GLOO_LAZY_CONTEXT_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/store/store.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"

namespace shardkit::gloo_backend {

class LazyContext final : public ::gloo::Context {
 public:
  // Creates no pair yet. Throws what Gloo throws (device->createContext).
  LazyContext(std::shared_ptr<::gloo::transport::Device> device, int rank, int size,
              std::shared_ptr<Store> store, std::string key_prefix);

  // Whether every one of `peers` already has a connected pair.
  bool Connected(const std::vector<int>& peers) const;

  // Makes a connected pair to each of `peers` (distinct, not this rank) that has none; every such
  // peer must call it with this rank among its peers. Errors name the peer ("connecting Gloo pair
  // to rank 7: ..."): kDeadlineExceeded, kUnavailable (Gloo's errors), kAborted after
  // AbortConnect, the store's errors.
  absl::Status ConnectPairs(const std::vector<int>& peers, absl::Time deadline);

  // The descriptor of the connected socket of the pair to `peer` (pair_socket.h), for the peer
  // watch to look at; -1 if there is no pair or it was not found. Only looks are allowed: Gloo
  // owns it (and closes it when the connection ends).
  int Socket(int peer) const;

  // Ends the waits of a ConnectPairs in progress (closing the pairs it is connecting) and fails
  // it with kAborted, now or at its next step; also every later one. Any thread.
  void AbortConnect() noexcept;

 private:
  struct Pending;  // one pair being connected

  absl::Status CreateAndPublish(const std::vector<int>& peers, absl::Time deadline);
  absl::Status ReadAddress(Pending& pending, absl::Time deadline);
  absl::Status Connect(const Pending& pending, absl::Time deadline);
  absl::Status ConnectAll(std::vector<Pending>& pending, absl::Time deadline);
  bool StartConnecting(const std::vector<Pending>& pending);
  void StopConnecting();
  std::string Key(int from, int to) const;

  const std::shared_ptr<Store> store_;
  const std::string key_prefix_;
  void FindSockets(const std::vector<Pending>& pending);

  std::vector<bool> connected_;  // by peer; touched only by the ConnectPairs thread
  std::vector<int> sockets_;     // by peer: Socket(); likewise

  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;                             // guards connecting_
  std::vector<::gloo::transport::Pair*> connecting_;  // the pairs AbortConnect closes
};

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_LAZY_CONTEXT_H_
