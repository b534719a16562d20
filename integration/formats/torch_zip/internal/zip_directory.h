// The zip layer of torch_zip.h: a stored (uncompressed) zip archive that lies at a byte range of
// a file, its directories read and checked, its records located through their local headers.
// Offsets in messages are absolute in the file; those in ZipEntry and ZipRecord are relative to
// the archive's start (as the archive records them).
#ifndef SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_INTERNAL_ZIP_DIRECTORY_H_
#define SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_INTERNAL_ZIP_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace shardkit::torch_zip::internal {

struct ZipEntry {
  std::string name;           // the whole name, "archive/data.pkl"
  uint64_t local_header = 0;  // relative offset of its local file header
  uint64_t size = 0;          // stored: compressed and uncompressed sizes are equal
};

// A record's data: [offset, offset + size), relative to the archive's start.
struct ZipRecord {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Not copyable state beyond plain values: the fd is borrowed, never closed.
class ZipDirectory {
 public:
  // Reads and checks the end of central directory (zip64 included) and the central directory of
  // the archive at [base, base + length) of `fd` (the range must lie in the file; the caller checks
  // it against the file's size). Errors: kInvalidArgument "zip: ..." naming the absolute offset;
  // kUnavailable for I/O errors.
  [[nodiscard]] static absl::StatusOr<ZipDirectory> Read(int fd, uint64_t base, uint64_t length,
                                                         uint64_t max_directory_bytes);

  // The top folder every name is under ("archive").
  const std::string& top() const { return top_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }  // sorted by name
  uint64_t base() const { return base_; }

  // The entry "<top>/<name>", or nullptr.
  const ZipEntry* Find(std::string_view name) const;

  // Where `entry`'s data lie, from its local header (name and method checked; the data before the
  // central directory). Errors: as Read.
  [[nodiscard]] absl::StatusOr<ZipRecord> Locate(const ZipEntry& entry) const;

  // `entry`'s bytes, at most `max_bytes` of them (a larger record is an error).
  [[nodiscard]] absl::StatusOr<std::string> ReadRecord(const ZipEntry& entry,
                                                       uint64_t max_bytes) const;

 private:
  ZipDirectory() = default;
  absl::Status ReadEnd(uint64_t max_directory_bytes);
  absl::Status ReadCentralDirectory(uint64_t entries, uint64_t directory_size);

  int fd_ = -1;
  uint64_t base_ = 0;
  uint64_t length_ = 0;
  uint64_t directory_offset_ = 0;  // relative: where the central directory starts
  std::string top_;
  std::vector<ZipEntry> entries_;
};

// Reads exactly `size` bytes at absolute `offset`. Errors: kInvalidArgument if the file ends
// first (it shrank); kUnavailable naming the OS error.
[[nodiscard]] absl::Status ReadAt(int fd, uint64_t offset, size_t size, void* out);

}  // namespace shardkit::torch_zip::internal

#endif  // SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_INTERNAL_ZIP_DIRECTORY_H_
