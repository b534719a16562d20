#include "core/base/slot_pipe.h"

#include <utility>

namespace shardkit {

std::optional<size_t> SlotPipe::AcquireFree() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return closed_ || !filled_[produce_]; });
  if (closed_) return std::nullopt;
  const size_t slot = produce_;
  produce_ = (produce_ + 1) % filled_.size();
  return slot;
}

void SlotPipe::Publish(size_t slot, absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    filled_[slot] = true;
    status_[slot] = std::move(status);
  }
  changed_.notify_all();
}

std::optional<SlotPipe::Filled> SlotPipe::WaitFilled() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return closed_ || filled_[consume_]; });
  if (closed_) return std::nullopt;
  Filled filled{consume_, std::move(status_[consume_])};
  consume_ = (consume_ + 1) % filled_.size();
  return filled;
}

void SlotPipe::Release(size_t slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    filled_[slot] = false;
  }
  changed_.notify_all();
}

void SlotPipe::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  changed_.notify_all();
}

}  // namespace shardkit
