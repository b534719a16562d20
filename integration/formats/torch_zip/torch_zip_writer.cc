#include "integration/formats/torch_zip/torch_zip_writer.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/formats/pickle/internal/pickle_globals.h"
#include "integration/formats/pickle/pickle_writer.h"
#include "integration/formats/torch_zip/internal/crc32.h"
#include "integration/formats/torch_zip/torch_zip.h"

namespace shardkit::torch_zip {

using ::shardkit::pickle::PickleWriter;
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kDescriptor = 0x08074b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kEnd = 0x06054b50;
constexpr uint64_t kMax32 = 0xffffffff;  // a size or offset from here on needs zip64
constexpr uint64_t kAlignment = 64;      // torch's kFieldAlignment
const std::string_view kTop = "archive/";

// `value` as `bytes` little-endian bytes (beyond its 8: zeros; a shift of 64 or more would be
// undefined).
void Le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out += static_cast<char>(i < 8 ? (value >> (8 * i)) & 0xff : 0);
  }
}

struct Record {
  std::string name;
  uint64_t local_header = 0;
  uint64_t size = 0;
  uint32_t crc = 0;
  bool zip64 = false;  // a zip64 extra field in its local header, 8-byte sizes in its descriptor
  uint16_t flags() const { return size > 0 ? 0x808 : 0x800; }
};

// Lays the records out in order; `pos_` counts the bytes of the archive so far, those of data not
// held here (Skip) included.
class ZipLayout {
 public:
  void Begin(std::string_view name, uint64_t size, uint32_t crc) {
    Record record{std::string(kTop) + std::string(name), pos_, size, crc,
                  size >= kMax32 || pos_ >= kMax32};
    std::string zip64 = Zip64Extra(record);
    // torch's padding: the data start at a multiple of kAlignment.
    const uint64_t start = pos_ + 30 + record.name.size() + zip64.size() + 4;
    const uint64_t padding = (kAlignment - start % kAlignment) % kAlignment;
    std::string h;
    Le(h, kLocalHeader, 4);
    Le(h, 0, 2);  // version needed
    Le(h, record.flags(), 2);
    Le(h, 0, 18);  // method, time, date, CRC-32, sizes: 0 (sizes in the descriptor)
    Le(h, record.name.size(), 2);
    Le(h, zip64.size() + 4 + padding, 2);
    h += record.name + zip64 + "FB";
    Le(h, padding, 2);
    h.append(padding, 'Z');
    Append(h);
    records_.push_back(std::move(record));
  }

  // The data descriptor of the record begun last, its data written (or skipped).
  void End() {
    const Record& record = records_.back();
    if (record.size == 0) return;  // torch writes none for an empty record
    std::string d;
    Le(d, kDescriptor, 4);
    Le(d, record.crc, 4);
    Le(d, record.size, record.zip64 ? 8 : 4);
    Le(d, record.size, record.zip64 ? 8 : 4);
    Append(d);
  }

  void Add(std::string_view name, std::string_view data) {
    Begin(name, data.size(), internal::Crc32(data));
    Append(data);
    End();
  }

  void Append(std::string_view bytes) {
    out_ += bytes;
    pos_ += bytes.size();
  }
  void Skip(uint64_t bytes) { pos_ += bytes; }
  // The bytes appended since the last Take.
  std::string Take() { return std::exchange(out_, {}); }

  // The central directory and the end records.
  void Finish() {
    const uint64_t directory = pos_;
    for (const Record& record : records_) Append(CentralHeader(record));
    const uint64_t directory_size = pos_ - directory;
    const uint64_t zip64_end = pos_;
    std::string e;
    Le(e, kZip64End, 4);
    Le(e, 44, 8);      // the record's size after this field
    Le(e, 0x031e, 2);  // version made by, as torch writes it
    Le(e, 0x2d, 2);    // version needed: 4.5, zip64
    Le(e, 0, 8);       // this disk, the directory's disk
    Le(e, records_.size(), 8);
    Le(e, records_.size(), 8);
    Le(e, directory_size, 8);
    Le(e, directory, 8);
    Le(e, kZip64Locator, 4);
    Le(e, 0, 4);
    Le(e, zip64_end, 8);
    Le(e, 1, 4);  // disks
    Le(e, kEnd, 4);
    Le(e, 0, 4);
    Le(e, records_.size(), 2);
    Le(e, records_.size(), 2);
    Le(e, std::min(directory_size, kMax32), 4);
    Le(e, std::min(directory, kMax32), 4);
    Le(e, 0, 2);  // comment
    Append(e);
  }

 private:
  // The zip64 extended information (local header and central directory alike): the sizes
  // (uncompressed, compressed) if they need it, then the local header's offset if it does.
  static std::string Zip64Extra(const Record& record) {
    const bool big_size = record.size >= kMax32;
    const bool big_offset = record.local_header >= kMax32;
    if (!big_size && !big_offset) return "";
    std::string extra;
    Le(extra, 0x0001, 2);
    Le(extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0), 2);
    if (big_size) {
      Le(extra, record.size, 8);
      Le(extra, record.size, 8);
    }
    if (big_offset) Le(extra, record.local_header, 8);
    return extra;
  }

  static std::string CentralHeader(const Record& record) {
    const std::string zip64 = Zip64Extra(record);
    std::string h;
    Le(h, kCentralHeader, 4);
    Le(h, 0, 4);  // versions made by and needed
    Le(h, record.flags(), 2);
    Le(h, 0, 6);  // method, time, date
    Le(h, record.crc, 4);
    Le(h, std::min(record.size, kMax32), 4);
    Le(h, std::min(record.size, kMax32), 4);
    Le(h, record.name.size(), 2);
    Le(h, zip64.size(), 2);
    Le(h, 0, 10);  // comment length, disk, internal and external attributes
    Le(h, std::min(record.local_header, kMax32), 4);
    h += record.name + zip64;
    return h;
  }

  std::string out_;
  uint64_t pos_ = 0;
  std::vector<Record> records_;
};

// data.pkl, as torch.save pickles a tensor (protocol 2): _rebuild_tensor_v2(storage, 0, shape,
// strides, False, OrderedDict()) with a typed storage, or _rebuild_tensor_v3(..., dtype) with an
// untyped one. The storage is the persistent id ("storage", class, "0", "cpu", numel): elements
// for a typed storage, bytes for an untyped one.
std::string DataPkl(DType dtype, const Shape& shape, const ShapeSize& size) {
  const std::optional<std::string_view> typed = pickle::internal::TypedStorageName(dtype);
  const size_t args = typed ? 6 : 7;
  PickleWriter w;
  w.Global("torch._utils", typed ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
  w.BeginTuple(args);
  w.BeginTuple(5);
  w.Str("storage");
  w.Put();
  if (typed) {
    w.Global("torch", *typed);
  } else {
    w.Global("torch.storage", "UntypedStorage");
  }
  w.Str("0");
  w.Put();
  w.Str("cpu");
  w.Put();
  w.Int(typed ? size.numel : size.nbytes);
  w.EndTuple(5);
  w.Put();
  w.Raw("Q");  // BINPERSID
  w.Int(0);    // storage offset
  w.IntTuple(shape);
  w.IntTuple(ContiguousStrides(shape));
  w.Bool(false);  // requires_grad
  w.Global("collections", "OrderedDict");
  w.Raw(")R");
  w.Put();
  if (!typed) w.Global("torch", DTypeName(dtype));
  w.EndTuple(args);
  w.Put();
  w.Raw("R");
  w.Put();
  return w.Finish();
}

// 40 decimal digits, as torch's, but derived from data.pkl (FNV-1a) rather than random.
std::string SerializationId(std::string_view pkl) {
  uint64_t high = 0xcbf29ce484222325u, low = 0x84222325cbf29ce4u;
  for (char c : pkl) {
    high = (high ^ static_cast<uint8_t>(c)) * 0x100000001b3u;
    low = (low ^ static_cast<uint8_t>(c)) * 0x100000001b3u;
  }
  return absl::StrCat(absl::Dec(high, absl::kZeroPad20), absl::Dec(low, absl::kZeroPad20));
}

}  // namespace

absl::StatusOr<TensorArchive> MakeTensorArchive(DType dtype, const Shape& shape) {
  if (IsSubByte(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", std::string(DTypeName(dtype)),
                     " has no torch.save form of one element per value (torch stores sub-byte "
                     "dtypes packed in other dtypes)"));
  }
  if (shape.size() > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(shape), " has ",
                                                   shape.size(), " dimensions (at most ", kMaxDims,
                                                   ")"));
  }
  absl::StatusOr<ShapeSize> size = ComputeShapeSize(shape, dtype);
  if (!size.ok()) return Annotate(size.status(), "torch.save archive");
  const std::string pkl = DataPkl(dtype, shape, *size);
  TensorArchive archive;
  archive.data_length = static_cast<uint64_t>(size->nbytes);
  ZipLayout zip;
  zip.Add("data.pkl", pkl);
  zip.Add(".format_version", "1");
  zip.Add(".storage_alignment", "64");
  zip.Add("byteorder", "little");
  zip.Begin("data/0", archive.data_length, /*crc=*/0);
  archive.prefix = zip.Take();
  zip.Skip(archive.data_length);
  zip.End();
  zip.Add("version", "3\n");
  zip.Add(".data/serialization_id", SerializationId(pkl));
  zip.Finish();
  archive.suffix = zip.Take();
  return archive;
}

}  // namespace shardkit::torch_zip
