#include "core/store/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/os/socket.h"
#include "core/store/internal/store_util.h"
#include "core/store/internal/tcp_socket.h"
#include "core/store/internal/tcp_wire.h"

namespace shardkit {

namespace wire = internal::tcp_wire;

struct TcpStoreServer::Connection {
  os::Fd fd;
  std::string in;        // received bytes not yet handled
  std::string out;       // the reply being sent
  size_t out_sent = 0;   // bytes of `out` already sent
  bool greeted = false;  // the hello was received
};

namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxConnections = 16384;

// The store helpers put "<store>: " before their messages; the client adds its own name.
absl::Status Bare(const absl::Status& status) {
  absl::string_view message = status.message();
  absl::ConsumePrefix(&message, ": ");
  return absl::Status(status.code(), message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port) {
  absl::StatusOr<os::Fd> listen = os::ListenTcp(host, port);
  if (!listen.ok()) return listen.status();
  absl::StatusOr<int> bound = os::BoundPort(listen->get());
  if (!bound.ok()) return bound.status();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe: ", os::ErrnoText(errno)));
  }
  std::unique_ptr<TcpStoreServer> server(
      new TcpStoreServer(*std::move(listen), os::Fd(pipe_fds[0]), os::Fd(pipe_fds[1]), *bound));
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

TcpStoreServer::TcpStoreServer(os::Fd listen, os::Fd wake_read, os::Fd wake_write, int port)
    : listen_(std::move(listen)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      port_(port) {}

TcpStoreServer::~TcpStoreServer() {
  const char byte = 0;
  while (::write(wake_write_.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

void TcpStoreServer::Loop() {
  std::vector<pollfd> fds;
  while (true) {
    fds.assign({{wake_read_.get(), POLLIN, 0}, {accept_paused_ ? -1 : listen_.get(), POLLIN, 0}});
    for (const auto& c : connections_) {
      fds.push_back({c->fd.get(), static_cast<short>(c->out.empty() ? POLLIN : POLLOUT), 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
    if (fds[0].revents != 0) return;
    const size_t polled = connections_.size();
    if (fds[1].revents != 0) Accept();
    for (size_t i = 0; i < polled; ++i) {
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      Connection& c = *connections_[i];
      const bool keep = (revents & POLLOUT) != 0 ? Write(c) : Read(c);
      if (!keep) c.fd.reset();
    }
    const size_t before = connections_.size();
    std::erase_if(connections_, [](const auto& c) { return c->fd.get() < 0; });
    if (connections_.size() < before) accept_paused_ = false;
    clients_.store(connections_.size());
  }
}

bool TcpStoreServer::AwaitNoClients(absl::Time deadline) const {
  while (clients_.load() > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(std::min(absl::Milliseconds(5), deadline - absl::Now()));
  }
  return true;
}

void TcpStoreServer::Accept() {
  while (connections_.size() < kMaxConnections) {
    const int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the pending connection stays queued until one closes.
      if (errno == EMFILE || errno == ENFILE) accept_paused_ = true;
      return;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = os::Fd(fd);
    connections_.push_back(std::move(connection));
  }
  accept_paused_ = true;
}

bool TcpStoreServer::Read(Connection& c) {
  char buffer[kReadChunk];
  const ssize_t n = ::recv(c.fd.get(), buffer, sizeof(buffer), 0);
  if (n == 0) return false;  // the client went away (maybe mid-request)
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c.in.append(buffer, static_cast<size_t>(n));
  return Process(c);
}

bool TcpStoreServer::Flush(Connection& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out_sent += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out_sent = 0;
  return true;
}

bool TcpStoreServer::Write(Connection& c) {
  return Flush(c) && (!c.out.empty() || Process(c));  // requests that came while it was pending
}

// Handles complete frames until one reply is pending (sent at once if the socket takes it).
bool TcpStoreServer::Process(Connection& c) {
  while (c.out.empty() && c.in.size() >= wire::kHeaderBytes) {
    const uint32_t size = wire::DecodeLength(c.in);
    if (size == 0 || size > wire::kMaxFrame) return false;
    if (c.in.size() < wire::kHeaderBytes + size) return true;
    const std::string reply = Handle(c, std::string_view(c.in).substr(wire::kHeaderBytes, size));
    if (reply.empty()) return false;
    c.in.erase(0, wire::kHeaderBytes + size);
    c.out = wire::EncodeFrame(reply);
    if (!Flush(c)) return false;
  }
  return true;
}

// The reply body to one request, or empty to close the connection.
std::string TcpStoreServer::Handle(Connection& c, std::string_view body) {
  absl::StatusOr<wire::Request> request = wire::DecodeRequest(body);
  if (!request.ok()) return "";
  if (request->op == wire::Op::kHello || !c.greeted) {
    if (request->op != wire::Op::kHello || request->key != wire::kMagic) return "";
    c.greeted = true;
    std::string payload;
    wire::AppendString(&payload, wire::kMagic);
    return wire::OkResponse(payload);
  }
  if (absl::Status valid = internal::ValidateKey("", request->key); !valid.ok()) {
    return wire::ErrorResponse(Bare(valid));
  }
  std::string payload;
  auto it = data_.find(request->key);
  switch (request->op) {
    case wire::Op::kSet:
      data_[request->key] = std::move(request->value);
      break;
    case wire::Op::kGet:
      wire::AppendBool(&payload, it != data_.end());
      if (it != data_.end()) wire::AppendString(&payload, it->second);
      break;
    case wire::Op::kExists:
      wire::AppendBool(&payload, it != data_.end());
      break;
    default: {  // kAdd
      std::optional<std::string> old;
      if (it != data_.end()) old = it->second;
      absl::StatusOr<int64_t> sum = internal::AddToCounter("", request->key, old, request->delta);
      if (!sum.ok()) return wire::ErrorResponse(Bare(sum.status()));
      data_[request->key] = absl::StrCat(*sum);
      wire::AppendInt64(&payload, *sum);
    }
  }
  return wire::OkResponse(payload);
}

}  // namespace shardkit
