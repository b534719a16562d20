#include "core/base/background_stage.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "core/base/slot_pipe.h"
#include "gtest/gtest.h"

namespace shardkit {
namespace {

// A producer stage fills two slots in turn for 5 rounds; the owner consumes them in order.
TEST(BackgroundStage, ProducerFillsEveryRoundInOrder) {
  SlotPipe pipe(2);
  std::vector<int64_t> slots(2, -1);
  BackgroundStage filler(pipe, BackgroundStage::kProducer, 5, [&](int64_t k, size_t slot) {
    slots[slot] = k;
    return k == 3 ? absl::DataLossError("round 3") : absl::OkStatus();
  });
  for (int64_t k = 0; k < 5; ++k) {
    std::optional<SlotPipe::Filled> filled = pipe.WaitFilled();
    ASSERT_TRUE(filled.has_value());
    EXPECT_EQ(filled->slot, static_cast<size_t>(k % 2));
    EXPECT_EQ(slots[filled->slot], k);
    EXPECT_EQ(filled->status.ok(), k != 3) << "a fill's status comes with its slot";
    pipe.Release(filled->slot);
  }
  filler.Join();
  EXPECT_TRUE(filler.status().ok());
}

// A consumer stage's first error stops it and closes the pipe, which wakes the owner.
TEST(BackgroundStage, ConsumerErrorClosesThePipe) {
  SlotPipe pipe(2);
  std::vector<int64_t> seen;
  BackgroundStage writer(pipe, BackgroundStage::kConsumer, 10, [&](int64_t k, size_t) {
    seen.push_back(k);
    return k == 2 ? absl::UnavailableError("disk full") : absl::OkStatus();
  });
  int64_t published = 0;
  while (std::optional<size_t> slot = pipe.AcquireFree()) {
    pipe.Publish(*slot, absl::OkStatus());
    ++published;
  }
  writer.Join();
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_GE(published, 3);
  EXPECT_LE(published, 5);
}

// The destructor closes the pipe and joins a stage still waiting.
TEST(BackgroundStage, DestructorStopsAWaitingStage) {
  SlotPipe pipe(1);
  {
    BackgroundStage writer(pipe, BackgroundStage::kConsumer, 3,
                           [](int64_t, size_t) { return absl::OkStatus(); });
  }
  EXPECT_FALSE(pipe.AcquireFree().has_value()) << "closed";
}

}  // namespace
}  // namespace shardkit
