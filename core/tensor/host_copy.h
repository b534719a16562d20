// Copies between host buffers that bypass the cache for large copies.
//
// glibc's memcpy switches to non-temporal stores only above a threshold derived from the L3 size
// the CPU reports, and the hypervisor of these machines reports 480 MiB: every copy shardkit makes
// (a source's own shard, packing, unpacking) then reads each destination line before writing it.
// From kStreamFrom bytes on these copies write around the cache instead (docs/performance.md:
// each of 4 ranks copying 64 MiB, 0.019–0.020 s with memcpy, 0.012–0.015 s streaming).
//
//   CopyHostBytes(dst, src, n);              // one copy, fenced
//   HostRunCopier copier(total, overlapping);
//   copier.Copy(dst, src, run);  …           // the runs of one copy, then
//   copier.Finish();                         // before another thread or process reads them
#ifndef SHARDKIT_CORE_TENSOR_HOST_COPY_H_
#define SHARDKIT_CORE_TENSOR_HOST_COPY_H_

#include <cstddef>

namespace shardkit {

// Copies of at least this many bytes in all stream (a copy made of runs: the total counts).
inline constexpr size_t kStreamFrom = size_t{1} << 20;

// memmove for overlapping or small copies; StreamHostBytes and StreamFence from kStreamFrom on.
void CopyHostBytes(void* dst, const void* src, size_t n);

// Copies `n` bytes between non-overlapping host buffers with non-temporal stores where the
// destination is aligned for them (plain copies at the unaligned ends). Unfenced: StreamFence()
// before the bytes are read elsewhere.
void StreamHostBytes(void* dst, const void* src, size_t n);

// Orders every StreamHostBytes of this thread before what follows (sfence).
void StreamFence();

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool HostBytesOverlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes);

// The runs of one copy of `total` bytes in all: streamed from kStreamFrom on unless the two sides
// may overlap (then memmove); Finish() fences what streamed.
class HostRunCopier {
 public:
  HostRunCopier(size_t total, bool overlapping) : stream_(total >= kStreamFrom && !overlapping) {}
  void Copy(void* dst, const void* src, size_t n) const;
  void Finish() const;

 private:
  bool stream_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_HOST_COPY_H_
