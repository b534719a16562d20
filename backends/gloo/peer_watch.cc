#include "backends/gloo/peer_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

namespace shardkit::gloo_backend {
namespace {

// How long one look at the connections may block: bounds how late a Disarm, or the next Arm's
// peers, are noticed (destruction interrupts it at once).
constexpr absl::Duration kLookInterval = absl::Milliseconds(50);
// The same while sockets are watched too: those are looked at between the mesh's looks.
constexpr absl::Duration kSocketLookInterval = absl::Milliseconds(10);

}  // namespace

std::vector<SocketMesh::Departure> ClosedSockets(const std::vector<std::pair<int, int>>& sockets) {
  std::vector<SocketMesh::Departure> closed;
  std::vector<pollfd> polled;
  for (const auto& [peer, fd] : sockets) polled.push_back({fd, POLLRDHUP, 0});
  if (polled.empty() || ::poll(polled.data(), polled.size(), 0) <= 0) return closed;
  for (size_t i = 0; i < polled.size(); ++i) {
    const short ended = polled[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL);
    if (ended == 0) continue;
    int unread = 0;
    if ((ended & POLLNVAL) == 0 && ::ioctl(polled[i].fd, FIONREAD, &unread) == 0 && unread > 0) {
      continue;  // Gloo has yet to read what the peer sent before it left
    }
    closed.push_back({sockets[i].first, SocketMesh::Departure::How::kConnectionClosed});
  }
  return closed;
}

PeerWatch::PeerWatch(const SocketMesh& mesh)
    : mesh_(mesh), stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

PeerWatch::~PeerWatch() {
  Stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void PeerWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::Arm(std::vector<int> peers, uint64_t call, std::function<void()> abort,
                    std::vector<std::pair<int, int>> sockets) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    ++generation_;
    armed_ = true;
    peers_ = std::move(peers);
    sockets_ = std::move(sockets);
    call_ = call;
    abort_ = std::move(abort);
    lost_.reset();
    if (interrupted_) {  // abandoned already: this exchange's waits fail at once
      abort_();
      armed_ = false;
      return;
    }
    if (!thread_.joinable()) thread_ = std::thread(&PeerWatch::Run, this);
  }
  cv_.notify_all();
}

std::optional<SocketMesh::Departure> PeerWatch::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  armed_ = false;
  abort_ = nullptr;
  return lost_;
}

void PeerWatch::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  if (armed_ && abort_ != nullptr) {
    abort_();
    armed_ = false;
  }
}

void PeerWatch::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || armed_; });
    if (stop_) return;
    const uint64_t generation = generation_;
    std::vector<int> peers = peers_;
    const std::vector<std::pair<int, int>> sockets = sockets_;
    lock.unlock();
    std::vector<SocketMesh::Departure> departed =
        mesh_.Departures(peers, sockets.empty() ? kLookInterval : kSocketLookInterval, stop_fd_);
    if (departed.empty()) departed = ClosedSockets(sockets);
    lock.lock();
    if (stop_ || generation != generation_) continue;
    for (const SocketMesh::Departure& d : departed) {
      using How = SocketMesh::Departure::How;
      const bool finished_its_part =
          d.how == How::kGoodbye || (d.how == How::kGaveUp && d.call > call_);
      if (finished_its_part) {
        // Not a failure of this call; stop looking at it (its end would wake every look).
        peers_.erase(std::remove(peers_.begin(), peers_.end(), d.peer), peers_.end());
        if (peers_.empty()) armed_ = false;
        continue;
      }
      lost_ = d;
      abort_();
      armed_ = false;
      break;
    }
  }
}

}  // namespace shardkit::gloo_backend
