#include "core/tensor/host_copy.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstdint>
#include <cstring>

namespace shardkit {
namespace {

constexpr size_t kVector = 16;         // one SSE2 store
constexpr size_t kLine = 4 * kVector;  // a cache line per loop

}  // namespace

#if defined(__SSE2__)
void StreamHostBytes(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  const size_t misaligned = reinterpret_cast<uintptr_t>(out) % kVector;
  const size_t head = misaligned == 0 ? 0 : kVector - misaligned;
  if (n < head + kLine) {
    std::memcpy(out, in, n);
    return;
  }
  std::memcpy(out, in, head);
  out += head;
  in += head;
  n -= head;
  for (; n >= kLine; n -= kLine, out += kLine, in += kLine) {
    const auto* from = reinterpret_cast<const __m128i*>(in);
    auto* to = reinterpret_cast<__m128i*>(out);
    const __m128i a = _mm_loadu_si128(from);
    const __m128i b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2);
    const __m128i d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
  }
  std::memcpy(out, in, n);
}

void StreamFence() { _mm_sfence(); }
#else
void StreamHostBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}
void StreamFence() {}
#endif

bool HostBytesOverlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto a_at = reinterpret_cast<uintptr_t>(a);
  const auto b_at = reinterpret_cast<uintptr_t>(b);
  return a_at < b_at + b_bytes && b_at < a_at + a_bytes;
}

void HostRunCopier::Copy(void* dst, const void* src, size_t n) const {
  if (n == 0) return;
  if (stream_) {
    StreamHostBytes(dst, src, n);
  } else {
    std::memmove(dst, src, n);
  }
}

void HostRunCopier::Finish() const {
  if (stream_) StreamFence();
}

void CopyHostBytes(void* dst, const void* src, size_t n) {
  const HostRunCopier copier(n, HostBytesOverlap(dst, n, src, n));
  copier.Copy(dst, src, n);
  copier.Finish();
}

}  // namespace shardkit
