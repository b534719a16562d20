// BackgroundStage: one side of a SlotPipe (slot_pipe.h) run on a thread of its own, round by
// round — the one background stage of every double-buffered loop in the tree: the checkpoint
// stream's reader that fills windows while the caller sends them, the writers that write buffers
// while the caller receives the next ones (stream_shard.h, gather_checkpoint.h), the box mover's
// packer that packs round r + 1 while round r is on the wire (core/engine/internal/box_mover.h),
// and ShardParameter's copier of the source's own shards during the scatter (one round).
//
//   SlotPipe pipe(2);
//   BackgroundStage writer(pipe, BackgroundStage::kConsumer, rounds,
//                          [&](int64_t k, size_t slot) { return Write(k, buffers[slot]); });
//   for (int64_t k = 0; k < rounds; ++k) {
//     std::optional<size_t> slot = pipe.AcquireFree();
//     if (!slot) break;  // the writer failed: writer.status() says why
//     Fill(buffers[*slot]);
//     pipe.Publish(*slot, absl::OkStatus());
//   }
//   writer.Join();
//   return writer.status();
//
// A producer stage takes each free slot in turn, runs `fn(k, slot)` and publishes the slot with
// its status (the consumer decides what a failed fill stops). A consumer stage takes each filled
// slot in turn, runs `fn(k, slot)` and releases it; its first error is kept (status()), the pipe
// closed (waking the caller) and the stage stops. Either stops when the pipe is closed. The
// destructor closes the pipe and joins. status() is thread-safe; the others are for the owner.
#ifndef SHARDKIT_CORE_BASE_BACKGROUND_STAGE_H_
#define SHARDKIT_CORE_BASE_BACKGROUND_STAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "core/base/slot_pipe.h"

namespace shardkit {

class BackgroundStage {
 public:
  enum Side { kProducer, kConsumer };
  using RoundFn = std::function<absl::Status(int64_t round, size_t slot)>;

  // Starts the thread: `fn` for rounds 0 .. rounds - 1 on `side` of `pipe` (which must outlive
  // the stage).
  BackgroundStage(SlotPipe& pipe, Side side, int64_t rounds, RoundFn fn);
  ~BackgroundStage();
  BackgroundStage(const BackgroundStage&) = delete;
  BackgroundStage& operator=(const BackgroundStage&) = delete;

  // Waits for the thread (idempotent). Does not close the pipe.
  void Join();
  // A consumer's first error (OK while none, and always for a producer).
  absl::Status status() const;

 private:
  void Run(Side side, int64_t rounds);

  SlotPipe& pipe_;
  RoundFn fn_;
  mutable std::mutex mu_;
  absl::Status status_;
  std::thread thread_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_BACKGROUND_STAGE_H_
