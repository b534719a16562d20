// TensorBytesReader: copies byte ranges of one tensor's data in a safetensors file into memory —
// long ranges with one pread straight into place, short ones (a shard's rows of a few KiB)
// through a small reused staging buffer that one pread fills for many of them. The streaming
// paths (shard's source, gather, reshard) read every byte they need this way, once, and never map
// a file.
//
//   TensorBytesReader reader(staging);           // staging: caller-owned, reused
//   reader.Reset(file, info, /*limit=*/end);      // the tensor to read from, never past `end`
//   SHARDKIT_RETURN_IF_ERROR(reader.Copy(offset, bytes, dst));  // in increasing offset order
//
// A short copy outside what is staged stages the staging buffer's size from its offset (never
// past the limit). Copies in increasing offset order make every byte be read once; any order is
// correct. That reads every byte between the first copy and the limit: right when (nearly) all
// of them are wanted (gather).
//
// When only some of a range's bytes are wanted (a rank's columns of rows: reshard, direct), Want
// reads the wanted pieces and bounded gaps only (the coalescing rule, JoinsRead):
//
//   reader.Reset(file, info);
//   SHARDKIT_RETURN_IF_ERROR(reader.Want(at, bytes, dst));  // each wanted piece, increasing `at`
//   SHARDKIT_RETURN_IF_ERROR(reader.Flush());               // then every piece is in place
//
// Not thread-safe; `file` and `staging` must outlive the reader's use of them.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_TENSOR_BYTES_READER_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_TENSOR_BYTES_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "integration/checkpoint/source/tensor_source.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

// Ranges of at least this many bytes are read straight into place.
inline constexpr int64_t kDirectReadBytes = 64 << 10;

// The coalescing rule of TensorBytesReader::Want. Wanted pieces come in increasing offset order;
// one pread covers consecutive pieces and the gaps between them. A read covering tensor bytes
// [begin, end), `wanted` of them wanted, in `pieces` pieces, takes in the next piece
// [at, at + bytes) when
//   - the piece is shorter than kDirectReadBytes, and so is the read's piece if it has only one
//     (a piece of 64 KiB or more is read alone, straight into place);
//   - the read stays within the staging buffer and kMaxPiecesPerRead pieces; and
//   - the gap (at - end) is shorter than kPageBytes, or the read stays within 5/4 of its wanted
//     bytes.
// So a pread's bytes are at most 1.25 × the wanted bytes in it, plus the gaps shorter than a page
// it reads through. Such a gap holds no whole page of the file: every page read holds wanted
// bytes, so a file system that reads whole pages (the page cache, NFS) reads no more for it,
// while one syscall more per piece would cost more than copying the gap (about 0.5 µs, the time
// to copy 2-5 KB). Pieces 4 KiB or more apart are never read with more than 1.25 × their
// bytes: a rank's 5.3 KiB columns of 16 KiB rows (a [4096, 4096] F32 tensor cut on dim 1 over 3
// ranks) are one pread each, exactly their bytes. Adjacent pieces (every rank's columns, as a
// scatter source reads them) are staging-sized preads.
inline constexpr int64_t kPageBytes = 4096;
inline constexpr int64_t kMaxPiecesPerRead = 4096;
struct CoalescedRead {
  int64_t begin = 0;  // tensor bytes [begin, end) are read
  int64_t end = 0;
  int64_t wanted = 0;  // of which this many are wanted,
  int64_t pieces = 0;  // in this many pieces (0: no read yet)
};
// Whether the next piece [at, at + bytes) joins `read` (staging: the staging buffer's size).
[[nodiscard]] bool JoinsRead(const CoalescedRead& read, int64_t at, int64_t bytes, int64_t staging);

class TensorBytesReader {
 public:
  explicit TensorBytesReader(std::span<std::byte> staging) : staging_(staging) {}

  // Reads from `tensor` of `file` from now on (what was staged is forgotten); staged reads stop at
  // tensor byte `limit` (default: the tensor's end). Nothing Want took may be pending (Flush).
  void Reset(const safetensors::Reader& file, const safetensors::TensorInfo& tensor,
             int64_t limit = -1);
  // The same for tensor `t` of `source`.
  void Reset(const TensorSource& source, size_t t, int64_t limit = -1);
  // The same for `tensor_bytes` bytes that `read` reads: tensor bytes [offset, offset + size)
  // into dst (a DCP chunk's bytes in its zip record).
  using ReadFn = std::function<absl::Status(int64_t offset, int64_t size, std::byte* dst)>;
  void Reset(ReadFn read, int64_t tensor_bytes, int64_t limit = -1);

  // Copies bytes [offset, offset + size) of the tensor's data to `dst` (straight into place when
  // it is long, or when what would be staged is this copy only).
  // Errors: kUnavailable (naming the file) on I/O errors or a truncated file.
  [[nodiscard]] absl::Status Copy(int64_t offset, int64_t size, std::byte* dst);

  // Copies bytes [offset, offset + size) of the tensor's data to `dst`, now or at a later Want
  // or Flush: pieces given in increasing offset order are read together as JoinsRead says (one
  // pread into staging, then copied), a piece read alone straight into place. `dst` must stay
  // valid until Flush. Errors: as Copy (for this or an earlier pending piece; then nothing is
  // pending).
  [[nodiscard]] absl::Status Want(int64_t offset, int64_t size, std::byte* dst);
  // Reads every piece Want took that is still pending. Errors: as Copy.
  [[nodiscard]] absl::Status Flush();

  // Bytes read from the file so far (staged reads count what they read, gaps included).
  int64_t bytes_read() const { return bytes_read_; }

 private:
  // Reads tensor bytes [begin, end) (at most the staging size) into staging.
  absl::Status Load(int64_t begin, int64_t end);

  // A piece Want took: tensor bytes [offset, offset + size) go to dst.
  struct Pending {
    int64_t offset;
    int64_t size;
    std::byte* dst;
  };

  std::span<std::byte> staging_;
  ReadFn read_;
  CoalescedRead coalesced_;       // what the pending pieces' pread covers
  std::vector<Pending> pending_;  // in increasing offset order
  int64_t tensor_bytes_ = 0;
  int64_t staged_begin_ = 0;  // tensor bytes [staged_begin_, staged_end_) are in staging_
  int64_t staged_end_ = 0;
  int64_t limit_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_STREAM_TENSOR_BYTES_READER_H_
