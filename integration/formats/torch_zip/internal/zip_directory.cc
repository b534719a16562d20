#include "integration/formats/torch_zip/internal/zip_directory.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"

namespace shardkit::torch_zip::internal {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;    // "PK\3\4"
constexpr uint32_t kCentralHeader = 0x02014b50;  // "PK\1\2"
constexpr uint32_t kEnd = 0x06054b50;            // "PK\5\6"
constexpr uint32_t kZip64End = 0x06064b50;       // "PK\6\6"
constexpr uint32_t kZip64Locator = 0x07064b50;   // "PK\6\7"
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint64_t kMaxComment = 0xffff;

uint64_t Le(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(p[i]);
  return value;
}
uint16_t U16(const char* p) { return static_cast<uint16_t>(Le(p, 2)); }
uint32_t U32(const char* p) { return static_cast<uint32_t>(Le(p, 4)); }
uint64_t U64(const char* p) { return Le(p, 8); }

absl::Status Invalid(uint64_t at, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("zip: at byte ", at, ": ", message));
}

// The zip64 extended information of a central directory entry: the 64-bit values of the fields
// that hold 0xffffffff, in the order the format gives.
absl::Status ApplyZip64Extra(std::string_view extra, uint64_t at, uint64_t& size,
                             uint64_t& compressed, uint64_t& local_header) {
  while (extra.size() >= 4) {
    const uint16_t id = U16(extra.data());
    const uint16_t length = U16(extra.data() + 2);
    if (length > extra.size() - 4) return Invalid(at, "an extra field runs past its entry");
    if (id == 0x0001) {
      std::string_view values = extra.substr(4, length);
      for (uint64_t* field : {&size, &compressed, &local_header}) {
        if (*field != 0xffffffff) continue;
        if (values.size() < 8) return Invalid(at, "a zip64 extra field too short");
        *field = U64(values.data());
        values.remove_prefix(8);
      }
      return absl::OkStatus();
    }
    extra.remove_prefix(4 + length);
  }
  if (size == 0xffffffff || compressed == 0xffffffff || local_header == 0xffffffff) {
    return Invalid(at, "zip64 sizes without a zip64 extra field");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadAt(int fd, uint64_t offset, size_t size, void* out) {
  if (const int err = os::PreadFully(fd, out, size, offset); err != 0) {
    if (err == os::kNoBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the file ends before byte ", offset + size, " (it shrank?)"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot read bytes at ", offset, ": ", os::ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ZipDirectory> ZipDirectory::Read(int fd, uint64_t base, uint64_t length,
                                                uint64_t max_directory_bytes) {
  ZipDirectory zip;
  zip.fd_ = fd;
  zip.base_ = base;
  zip.length_ = length;
  SHARDKIT_RETURN_IF_ERROR(zip.ReadEnd(max_directory_bytes));
  return zip;
}

// The end of central directory record: the last "PK\5\6" whose comment ends the range exactly;
// then, if a zip64 locator precedes it, the zip64 record it points to.
absl::Status ZipDirectory::ReadEnd(uint64_t max_directory_bytes) {
  if (length_ < kEndSize) {
    return Invalid(base_, absl::StrCat("the item has ", length_,
                                       " bytes, fewer than a zip's end record: not a zip archive"));
  }
  const uint64_t tail_size =
      std::min<uint64_t>(length_, kEndSize + kMaxComment + kZip64LocatorSize);
  std::string tail(tail_size, '\0');
  const uint64_t tail_start = length_ - tail_size;
  SHARDKIT_RETURN_IF_ERROR(ReadAt(fd_, base_ + tail_start, tail_size, tail.data()));
  size_t end = std::string::npos;
  for (size_t i = tail_size - kEndSize + 1; i-- > 0;) {
    if (U32(tail.data() + i) == kEnd && U16(tail.data() + i + 20) == tail_size - i - kEndSize) {
      end = i;
      break;
    }
  }
  if (end == std::string::npos) {
    return Invalid(base_ + length_,
                   "no end of central directory record before the item's end: "
                   "not a zip archive, or a truncated one");
  }
  const char* e = tail.data() + end;
  const uint64_t end_at = tail_start + end;  // relative
  uint64_t disk = U16(e + 4), directory_disk = U16(e + 6);
  uint64_t disk_entries = U16(e + 8), entries = U16(e + 10);
  uint64_t directory_size = U32(e + 12), directory_offset = U32(e + 16);
  uint64_t directory_end = end_at;  // where the central directory must end
  if (end >= kZip64LocatorSize && U32(e - kZip64LocatorSize) == kZip64Locator) {
    const char* locator = e - kZip64LocatorSize;
    const uint64_t record = U64(locator + 8);
    if (U32(locator + 4) != 0 || U32(locator + 16) != 1) {
      return Invalid(base_ + end_at - kZip64LocatorSize, "a zip64 archive of several disks");
    }
    if (record > end_at - kZip64LocatorSize ||
        end_at - kZip64LocatorSize - record < kZip64EndSize) {
      return Invalid(base_ + end_at - kZip64LocatorSize,
                     absl::StrCat("the zip64 end record's offset ", record,
                                  " does not leave room for it before its locator"));
    }
    char z[kZip64EndSize];
    SHARDKIT_RETURN_IF_ERROR(ReadAt(fd_, base_ + record, sizeof(z), z));
    if (U32(z) != kZip64End)
      return Invalid(base_ + record, "no zip64 end record where its locator says");
    disk = U32(z + 16);
    directory_disk = U32(z + 20);
    disk_entries = U64(z + 24);
    entries = U64(z + 32);
    directory_size = U64(z + 40);
    directory_offset = U64(z + 48);
    directory_end = record;
  } else if (entries == 0xffff || directory_size == 0xffffffff || directory_offset == 0xffffffff) {
    return Invalid(base_ + end_at, "zip64 values in the end record but no zip64 locator");
  }
  if (disk != 0 || directory_disk != 0 || disk_entries != entries) {
    return Invalid(base_ + end_at, "an archive of several disks");
  }
  if (directory_size > max_directory_bytes) {
    return Invalid(base_ + end_at,
                   absl::StrCat("a central directory of ", directory_size, " bytes (at most ",
                                max_directory_bytes, " are read)"));
  }
  if (directory_offset > directory_end || directory_end - directory_offset != directory_size) {
    return Invalid(base_ + end_at, absl::StrCat("the central directory [", directory_offset, ", ",
                                                directory_offset + directory_size,
                                                ") does not end where the end records start (",
                                                directory_end, ")"));
  }
  if (entries > directory_size / kCentralHeaderSize) {
    return Invalid(base_ + end_at, absl::StrCat(entries,
                                                " entries cannot fit in a central "
                                                "directory of ",
                                                directory_size, " bytes"));
  }
  directory_offset_ = directory_offset;
  return ReadCentralDirectory(entries, directory_size);
}

absl::Status ZipDirectory::ReadCentralDirectory(uint64_t count, uint64_t directory_size) {
  std::string directory(directory_size, '\0');
  SHARDKIT_RETURN_IF_ERROR(
      ReadAt(fd_, base_ + directory_offset_, directory_size, directory.data()));
  size_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = base_ + directory_offset_ + pos;
    if (directory.size() - pos < kCentralHeaderSize ||
        U32(directory.data() + pos) != kCentralHeader) {
      return Invalid(at, absl::StrCat("central directory entry ", i, " is missing"));
    }
    const char* h = directory.data() + pos;
    const uint16_t flags = U16(h + 8), method = U16(h + 10);
    uint64_t compressed = U32(h + 20), size = U32(h + 24), local = U32(h + 42);
    const size_t name_size = U16(h + 28), extra_size = U16(h + 30), comment_size = U16(h + 32);
    if (directory.size() - pos - kCentralHeaderSize < name_size + extra_size + comment_size) {
      return Invalid(at, absl::StrCat("central directory entry ", i, " runs past the directory"));
    }
    ZipEntry entry;
    entry.name.assign(h + kCentralHeaderSize, name_size);
    const std::string_view extra(h + kCentralHeaderSize + name_size, extra_size);
    SHARDKIT_RETURN_IF_ERROR(ApplyZip64Extra(extra, at, size, compressed, local));
    const std::string what = absl::StrCat("record ", QuoteName(entry.name));
    if ((flags & 1) != 0) return Invalid(at, what + " is encrypted");
    if (method != 0 || compressed != size) {
      return Invalid(at, absl::StrCat(what, " is compressed (method ", method,
                                      "): only stored records can be read by range"));
    }
    if (local > directory_offset_ || directory_offset_ - local < kLocalHeaderSize) {
      return Invalid(at, absl::StrCat(what, ": local header offset ", local,
                                      " is not before the central directory"));
    }
    entry.local_header = local;
    entry.size = size;
    const size_t slash = entry.name.find('/');
    if (slash == std::string::npos || slash == 0) {
      return Invalid(at, what + " is not inside a top folder, as torch.save writes them");
    }
    if (i == 0) top_ = entry.name.substr(0, slash);
    if (entry.name.compare(0, slash, top_) != 0 || slash != top_.size()) {
      return Invalid(
          at, absl::StrCat(what, " is not under the archive's top folder ", QuoteName(top_)));
    }
    entries_.push_back(std::move(entry));
    pos += kCentralHeaderSize + name_size + extra_size + comment_size;
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const ZipEntry& a, const ZipEntry& b) { return a.name < b.name; });
  for (size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].name == entries_[i - 1].name) {
      return Invalid(base_ + directory_offset_,
                     absl::StrCat("record ", QuoteName(entries_[i].name), " twice"));
    }
  }
  return absl::OkStatus();
}

const ZipEntry* ZipDirectory::Find(std::string_view name) const {
  const std::string full = absl::StrCat(top_, "/", std::string(name));
  auto it = std::lower_bound(entries_.begin(), entries_.end(), full,
                             [](const ZipEntry& e, const std::string& n) { return e.name < n; });
  return it != entries_.end() && it->name == full ? &*it : nullptr;
}

absl::StatusOr<ZipRecord> ZipDirectory::Locate(const ZipEntry& entry) const {
  const uint64_t at = base_ + entry.local_header;
  char h[kLocalHeaderSize];
  SHARDKIT_RETURN_IF_ERROR(ReadAt(fd_, at, sizeof(h), h));
  const std::string what = absl::StrCat("record ", QuoteName(entry.name));
  if (U32(h) != kLocalHeader) return Invalid(at, what + ": no local header where listed");
  const uint16_t flags = U16(h + 6), method = U16(h + 8);
  const uint64_t name_size = U16(h + 26), extra_size = U16(h + 28);
  if (method != 0)
    return Invalid(at, absl::StrCat(what, ": method ", method, " in its local header"));
  // With a data descriptor (flag 0x08, as torch writes) the local sizes are zero; else they must
  // agree with the central directory unless zip64 moved them to the extra field.
  const uint64_t local_size = U32(h + 22);
  if ((flags & 0x08) == 0 && local_size != 0xffffffff && local_size != entry.size) {
    return Invalid(at, absl::StrCat(what, ": local size ", local_size,
                                    " differs from the central directory's ", entry.size));
  }
  const uint64_t data = entry.local_header + kLocalHeaderSize + name_size + extra_size;
  if (data > directory_offset_ || directory_offset_ - data < entry.size) {
    return Invalid(at,
                   absl::StrCat(what, ": its ", entry.size, " bytes at ", base_ + data,
                                " run into the central directory at ", base_ + directory_offset_));
  }
  std::string name(name_size, '\0');
  SHARDKIT_RETURN_IF_ERROR(ReadAt(fd_, at + kLocalHeaderSize, name_size, name.data()));
  if (name != entry.name) {
    return Invalid(at, absl::StrCat(what, ": its local header names ", QuoteName(name)));
  }
  return ZipRecord{data, entry.size};
}

absl::StatusOr<std::string> ZipDirectory::ReadRecord(const ZipEntry& entry,
                                                     uint64_t max_bytes) const {
  SHARDKIT_ASSIGN_OR_RETURN(const ZipRecord record, Locate(entry));
  if (record.size > max_bytes) {
    return Invalid(base_ + record.offset,
                   absl::StrCat("record ", QuoteName(entry.name), " has ", record.size,
                                " bytes (at most ", max_bytes, " are read)"));
  }
  std::string bytes(record.size, '\0');
  SHARDKIT_RETURN_IF_ERROR(ReadAt(fd_, base_ + record.offset, record.size, bytes.data()));
  return bytes;
}

}  // namespace shardkit::torch_zip::internal
