// SlotPipe: a producer thread and a consumer thread handing a fixed set of reused buffers
// ("slots") to each other in order — how the streaming paths overlap reading, sending and writing
// without allocating per round.
//
//   SlotPipe pipe(2);
//   // producer:                              // consumer:
//   while (auto slot = pipe.AcquireFree()) {   while (auto filled = pipe.WaitFilled()) {
//     Fill(buffers[*slot]);                      Use(buffers[filled->slot], filled->status);
//     pipe.Publish(*slot, status);               pipe.Release(filled->slot);
//   }                                          }
//
// Slots are filled and consumed in order 0, 1, …, n-1, 0, …. Close() (either side, any thread)
// wakes both sides, after which AcquireFree and WaitFilled return nullopt. Thread-safe.
#ifndef SHARDKIT_CORE_BASE_SLOT_PIPE_H_
#define SHARDKIT_CORE_BASE_SLOT_PIPE_H_

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace shardkit {

class SlotPipe {
 public:
  struct Filled {
    size_t slot;
    absl::Status status;
  };

  explicit SlotPipe(size_t slots) : filled_(slots, false), status_(slots) {}

  // The producer's next slot, once the consumer has released it; nullopt once closed.
  std::optional<size_t> AcquireFree();
  void Publish(size_t slot, absl::Status status);
  // The consumer's next filled slot; nullopt once closed.
  std::optional<Filled> WaitFilled();
  void Release(size_t slot);
  void Close();

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<bool> filled_;
  std::vector<absl::Status> status_;
  size_t produce_ = 0;  // next slot the producer fills
  size_t consume_ = 0;  // next slot the consumer takes
  bool closed_ = false;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_SLOT_PIPE_H_
