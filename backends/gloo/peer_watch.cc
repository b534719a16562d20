#include "backends/gloo/peer_watch.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

namespace shardkit::gloo_backend {
namespace {

// How long one look at the connections may block: bounds how late a Disarm, or the next Arm's
// peers, are noticed (destruction interrupts it at once).
constexpr absl::Duration kLookInterval = absl::Milliseconds(50);

}  // namespace

PeerWatch::PeerWatch(const ControlMesh& mesh)
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

void PeerWatch::Arm(std::vector<int> peers, uint64_t call, std::function<void()> abort) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    ++generation_;
    armed_ = true;
    peers_ = std::move(peers);
    call_ = call;
    abort_ = std::move(abort);
    lost_.reset();
    if (!thread_.joinable()) thread_ = std::thread(&PeerWatch::Run, this);
  }
  cv_.notify_all();
}

std::optional<ControlMesh::Departure> PeerWatch::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  armed_ = false;
  abort_ = nullptr;
  return lost_;
}

void PeerWatch::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || armed_; });
    if (stop_) return;
    const uint64_t generation = generation_;
    std::vector<int> peers = peers_;
    lock.unlock();
    std::vector<ControlMesh::Departure> departed = mesh_.Departures(peers, kLookInterval, stop_fd_);
    lock.lock();
    if (stop_ || generation != generation_) continue;
    for (const ControlMesh::Departure& d : departed) {
      using How = ControlMesh::Departure::How;
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
