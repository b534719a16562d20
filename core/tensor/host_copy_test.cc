#include "core/tensor/host_copy.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace shardkit {
namespace {

constexpr size_t kGuard = 64;  // bytes around each destination that must stay untouched

std::vector<std::byte> Pattern(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

// Copies `n` bytes from source offset `s` to destination offset `d` with `copy`, then checks the
// copy and that nothing around it changed.
template <typename Copy>
void CheckCopy(size_t n, size_t d, size_t s, Copy copy) {
  const std::vector<std::byte> src = Pattern(n + s + 1, 1);  // never empty: memcmp of null
  std::vector<std::byte> dst = Pattern(n + d + 2 * kGuard, 2);
  const std::vector<std::byte> before = dst;
  copy(dst.data() + kGuard + d, src.data() + s, n);
  EXPECT_EQ(std::memcmp(dst.data() + kGuard + d, src.data() + s, n), 0)
      << n << " bytes to offset " << d << " from offset " << s;
  EXPECT_EQ(std::memcmp(dst.data(), before.data(), kGuard + d), 0) << "before the copy";
  EXPECT_EQ(std::memcmp(dst.data() + kGuard + d + n, before.data() + kGuard + d + n, kGuard), 0)
      << "after the copy";
}

TEST(HostCopyTest, StreamCopiesEverySizeAndAlignment) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{63}, size_t{64}, size_t{65}, size_t{79},
                   size_t{4095}, size_t{70000}}) {
    for (size_t d = 0; d < 17; ++d) {
      for (size_t s : {size_t{0}, size_t{1}, size_t{8}}) {
        CheckCopy(n, d, s, [](void* to, const void* from, size_t k) {
          StreamHostBytes(to, from, k);
          StreamFence();
        });
      }
    }
  }
}

TEST(HostCopyTest, LargeCopiesStreamAndSmallOnesDoNot) {
  for (size_t n : {kStreamFrom - 1, kStreamFrom, 3 * kStreamFrom + 17}) {
    for (size_t d : {size_t{0}, size_t{3}}) CheckCopy(n, d, 5, &CopyHostBytes);
  }
}

// Overlapping copies keep memmove's meaning, forwards and backwards.
TEST(HostCopyTest, OverlappingLargeCopyIsAMove) {
  const size_t n = 2 * kStreamFrom;
  for (ptrdiff_t shift : {ptrdiff_t{-4096}, ptrdiff_t{-1}, ptrdiff_t{1}, ptrdiff_t{4096}}) {
    std::vector<std::byte> buffer = Pattern(n + 8192, 3);
    std::vector<std::byte> expected = buffer;
    std::byte* from = buffer.data() + 4096;
    std::memmove(expected.data() + 4096 + shift, expected.data() + 4096, n);
    CopyHostBytes(from + shift, from, n);
    EXPECT_EQ(buffer, expected) << "shift " << shift;
  }
}

}  // namespace
}  // namespace shardkit
