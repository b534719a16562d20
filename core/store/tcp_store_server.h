// TcpStoreServer: the server side of a tcp://host:port store (what PyTorch's TCPStore master is to
// torchrun). It holds the keys in memory and serves them from one thread, with poll(): many
// clients at once, none able to block the others. Started by `shardkit launch` on the host of
// rank 0, or by rank 0's own process (OpenStoreAsRank, store_url.h); clients are TcpStore.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreServer> server,
//                             TcpStoreServer::Start("127.0.0.1", 0));  // any free port
//   SHARDKIT_ASSIGN_OR_RETURN(auto store, TcpStore::Connect("127.0.0.1", server->port()));
//
// Hostile or broken clients only lose their own connection: a frame longer than the protocol's
// limit, a body that does not decode, a first request that is not the hello, or a client that
// goes away mid-request closes that connection (internal/tcp_wire.h). Memory per client is one
// frame being received plus one reply being sent: a client that stops reading its replies is not
// read from either. A client that connects and stays silent costs one file descriptor.
// Thread-safety: Start, port(), AwaitNoClients and the destructor may be called from any thread.
#ifndef SHARDKIT_CORE_STORE_TCP_STORE_SERVER_H_
#define SHARDKIT_CORE_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/os/fd.h"

namespace shardkit {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: a free port, see port()) and starts the serving thread. A
  // loopback host is bound as is; another host must be this machine's, and every interface is
  // bound. Errors: kAlreadyExists if the port is in use; kNotFound for an unknown host;
  // kInvalidArgument if the host is not this machine; kUnavailable for other socket errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const std::string& host, int port);

  // Stops the thread and closes every connection: clients then fail, naming the store.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

  // Waits until no client is connected, or until `deadline`; returns whether none is. Polls (a
  // few ms apart): it serves a launcher that is about to stop the server anyway.
  bool AwaitNoClients(absl::Time deadline) const;

 private:
  struct Connection;

  TcpStoreServer(os::Fd listen, os::Fd wake_read, os::Fd wake_write, int port);

  void Loop();
  void Accept();
  // Each returns false when the connection must be closed.
  bool Read(Connection& c);
  bool Write(Connection& c);
  bool Flush(Connection& c);
  bool Process(Connection& c);
  std::string Handle(Connection& c, std::string_view body);

  os::Fd listen_;
  os::Fd wake_read_, wake_write_;  // a byte on the pipe stops the loop
  const int port_;
  // Touched by the serving thread only.
  std::unordered_map<std::string, std::string> data_;
  std::vector<std::unique_ptr<Connection>> connections_;
  bool accept_paused_ = false;      // out of file descriptors: resumes when a connection closes
  std::atomic<size_t> clients_{0};  // connections_.size(), for AwaitNoClients
  std::thread thread_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_TCP_STORE_SERVER_H_
