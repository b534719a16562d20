#include "core/base/background_stage.h"

#include <optional>
#include <utility>

namespace shardkit {

BackgroundStage::BackgroundStage(SlotPipe& pipe, Side side, int64_t rounds, RoundFn fn)
    : pipe_(pipe), fn_(std::move(fn)), thread_([this, side, rounds] { Run(side, rounds); }) {}

BackgroundStage::~BackgroundStage() {
  pipe_.Close();
  Join();
}

void BackgroundStage::Join() {
  if (thread_.joinable()) thread_.join();
}

absl::Status BackgroundStage::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void BackgroundStage::Run(Side side, int64_t rounds) {
  for (int64_t k = 0; k < rounds; ++k) {
    if (side == kProducer) {
      std::optional<size_t> slot = pipe_.AcquireFree();
      if (!slot) return;
      pipe_.Publish(*slot, fn_(k, *slot));
      continue;
    }
    std::optional<SlotPipe::Filled> filled = pipe_.WaitFilled();
    if (!filled) return;
    absl::Status status = fn_(k, filled->slot);
    pipe_.Release(filled->slot);
    if (!status.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = std::move(status);
      }
      pipe_.Close();  // wakes the owner, which reports it
      return;
    }
  }
}

}  // namespace shardkit
