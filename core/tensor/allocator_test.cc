#include "core/tensor/allocator.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "testing/status_matchers.h"

namespace shardkit {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// What the unmap observer saw since the current test began. The observer is added once per
// process, by the fixture's first SetUp (the slots are never freed).
std::mutex unmapped_mu;
std::vector<CpuBlock>& Unmapped() {
  static std::vector<CpuBlock> unmapped;
  return unmapped;
}

void RecordUnmap(void* base, size_t bytes) {
  // Still mapped while the observer runs: a registration can be dropped before the address is
  // reused.
  EXPECT_TRUE(FindCpuBlock(base, bytes).has_value());
  static_cast<volatile std::byte*>(base)[bytes - 1] = std::byte{7};
  std::lock_guard<std::mutex> lock(unmapped_mu);
  Unmapped().push_back({base, bytes});
}

// Every test starts from an empty cache with a known limit.
class CpuCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const bool observing = AddCpuBlockUnmapObserver(&RecordUnmap);
    observing_ = observing;
    SetCpuCacheLimit(64 * kMiB);
    ReleaseCpuCache();
    Unmapped().clear();
  }
  void TearDown() override { ReleaseCpuCache(); }

  bool observing_ = false;  // whether RecordUnmap is among the observers
};

std::shared_ptr<Storage> Allocate(size_t nbytes) {
  absl::StatusOr<std::shared_ptr<Storage>> storage = Storage::Allocate(Device::Cpu(), nbytes);
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? *storage : nullptr;
}

TEST_F(CpuCacheTest, LargeBlocksAreHugePageAlignedAndWritable) {
  std::shared_ptr<Storage> block = Allocate(3 * kMiB + 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block->data()) % (2 * kMiB), 0u);
  std::memset(block->data(), 0xab, block->nbytes());
  EXPECT_EQ(block->data()[block->nbytes() - 1], std::byte{0xab});
}

TEST_F(CpuCacheTest, FreedBlockIsReusedForTheSameRoundedSize) {
  void* first = Allocate(4 * kMiB)->data();  // freed at once
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, 4 * kMiB);
  std::shared_ptr<Storage> again = Allocate(4 * kMiB - 100);  // rounds to the same 4 MiB
  EXPECT_EQ(again->data(), first);
  const CpuCacheStats stats = GetCpuCacheStats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.cached_bytes, 0u);
}

TEST_F(CpuCacheTest, OtherSizesMapFreshMemory) {
  Allocate(4 * kMiB);
  std::shared_ptr<Storage> bigger = Allocate(6 * kMiB);
  const CpuCacheStats stats = GetCpuCacheStats();
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.cached_blocks, 1u);  // the 4 MiB block waits for a 4 MiB request
}

TEST_F(CpuCacheTest, MidSizeBlocksAreCachedAtPageGranularity) {
  void* first = Allocate(kMiB + 300 * 1024)->data();  // mapped as 1 MiB + 320 KiB
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, kMiB + 320 * 1024);
  std::shared_ptr<Storage> again = Allocate(kMiB + 310 * 1024);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(GetCpuCacheStats().hits, 1);
}

TEST_F(CpuCacheTest, SmallBlocksBypassTheCache) {
  Allocate(kMiB - 1);
  const CpuCacheStats stats = GetCpuCacheStats();
  EXPECT_EQ(stats.hits + stats.misses, 0);
  EXPECT_EQ(stats.cached_blocks, 0u);
}

TEST_F(CpuCacheTest, OldestBlocksAreEvictedBeyondTheLimit) {
  SetCpuCacheLimit(8 * kMiB);
  std::vector<std::shared_ptr<Storage>> held = {Allocate(4 * kMiB), Allocate(2 * kMiB),
                                                Allocate(2 * kMiB), Allocate(4 * kMiB)};
  void* newest = held[3]->data();
  for (std::shared_ptr<Storage>& block : held) block.reset();  // oldest first: 12 MiB offered
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, 8 * kMiB);
  EXPECT_EQ(GetCpuCacheStats().limit_bytes, 8 * kMiB);
  std::shared_ptr<Storage> first = Allocate(4 * kMiB);
  EXPECT_EQ(first->data(), newest);
  std::shared_ptr<Storage> second = Allocate(4 * kMiB);  // the first 4 MiB block was evicted
  const CpuCacheStats stats = GetCpuCacheStats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 5);
}

TEST_F(CpuCacheTest, BlockLargerThanTheLimitIsUnmapped) {
  SetCpuCacheLimit(2 * kMiB);
  Allocate(4 * kMiB);
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, 0u);
}

TEST_F(CpuCacheTest, ZeroLimitDisablesAndLoweringTheLimitEvicts) {
  Allocate(4 * kMiB);
  Allocate(2 * kMiB);
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, 6 * kMiB);
  SetCpuCacheLimit(3 * kMiB);
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, 2 * kMiB);  // the older 4 MiB block went first
  SetCpuCacheLimit(0);
  EXPECT_EQ(GetCpuCacheStats().cached_bytes, 0u);
  Allocate(2 * kMiB);
  EXPECT_EQ(GetCpuCacheStats().cached_blocks, 0u);
}

TEST_F(CpuCacheTest, ConcurrentAllocateAndFree) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) {
        std::shared_ptr<Storage> block = Allocate(static_cast<size_t>(2 + (i + t) % 3) * 2 * kMiB);
        block->data()[0] = std::byte{1};
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const CpuCacheStats stats = GetCpuCacheStats();
  EXPECT_EQ(stats.hits + stats.misses, 200);
  EXPECT_LE(stats.cached_bytes, 64 * kMiB);
}

TEST_F(CpuCacheTest, FindsTheMappedBlockHoldingARangeWhileHandedOutOrCached) {
  std::shared_ptr<Storage> block = Allocate(3 * kMiB + 1);  // mapped as 4 MiB
  std::byte* base = block->data();
  const std::optional<CpuBlock> whole = FindCpuBlock(base, block->nbytes());
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->base, base);
  EXPECT_EQ(whole->bytes, 4 * kMiB);
  const std::optional<CpuBlock> inner = FindCpuBlock(base + kMiB, 2 * kMiB);
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->base, base);
  EXPECT_FALSE(FindCpuBlock(base + kMiB, 4 * kMiB).has_value());  // runs past its end
  EXPECT_FALSE(FindCpuBlock(base - 1, 2).has_value());            // starts before it
  block.reset();  // cached: still mapped, still found
  EXPECT_TRUE(FindCpuBlock(base, 4 * kMiB).has_value());
  ReleaseCpuCache();
  EXPECT_FALSE(FindCpuBlock(base, 1).has_value());
}

TEST_F(CpuCacheTest, SmallBlocksAndOtherMemoryHaveNoBlock) {
  std::shared_ptr<Storage> small = Allocate(64 * 1024);
  EXPECT_FALSE(FindCpuBlock(small->data(), small->nbytes()).has_value());
  std::vector<std::byte> vector(4 * kMiB);
  EXPECT_FALSE(FindCpuBlock(vector.data(), vector.size()).has_value());
}

TEST_F(CpuCacheTest, ObserverHearsOfEveryUnmapBeforeItAndOfNothingElse) {
  ASSERT_TRUE(observing_);
  void* first = Allocate(4 * kMiB)->data();             // cached
  std::shared_ptr<Storage> again = Allocate(4 * kMiB);  // the same block, handed out again
  EXPECT_EQ(again->data(), first);
  EXPECT_TRUE(Unmapped().empty());
  again.reset();
  SetCpuCacheLimit(2 * kMiB);  // evicts it
  ASSERT_EQ(Unmapped().size(), 1u);
  EXPECT_EQ(Unmapped()[0].base, first);
  EXPECT_EQ(Unmapped()[0].bytes, 4 * kMiB);
  void* big = Allocate(6 * kMiB)->data();  // larger than the limit: unmapped when freed
  ASSERT_EQ(Unmapped().size(), 2u);
  EXPECT_EQ(Unmapped()[1].base, big);
  Allocate(2 * kMiB);
  ReleaseCpuCache();
  EXPECT_EQ(Unmapped().size(), 3u);
}

TEST_F(CpuCacheTest, AtMostEightObservers) {
  // Slots already taken by other tests of this process stay taken; fill the rest.
  auto ignore = [](void*, size_t) {};
  int added = 0;
  while (AddCpuBlockUnmapObserver(ignore) && added < 9) ++added;
  EXPECT_LE(added, 8);
  EXPECT_FALSE(AddCpuBlockUnmapObserver(ignore));
}

}  // namespace
}  // namespace shardkit
