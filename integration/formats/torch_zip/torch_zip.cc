#include "integration/formats/torch_zip/torch_zip.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "integration/formats/pickle/pickle_reader.h"
#include "integration/formats/torch_zip/internal/zip_directory.h"

namespace shardkit::torch_zip {

using ::shardkit::pickle::Pickle;
using ::shardkit::pickle::PickleGlobal;
using ::shardkit::pickle::PickleKind;
namespace {

using internal::ZipDirectory;
using internal::ZipEntry;
using internal::ZipRecord;
using Id = Pickle::Id;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// What data.pkl says: the tensor and the storage it views.
struct Rebuild {
  DType dtype = DType::kFloat32;
  std::string key;             // the storage record is data/<key>
  uint64_t storage_bytes = 0;  // from the persistent id's numel
  Shape shape;
  Shape strides;
  int64_t storage_offset = 0;
};

absl::StatusOr<Shape> ReadInts(const Pickle& p, Id id, const char* what) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> items, p.Tuple(id, what));
  if (items.size() > kMaxDims) {
    return Invalid(absl::StrCat("pickle byte ", p.offset(id), ": ", what, " has ", items.size(),
                                " dimensions (at most ", kMaxDims, ")"));
  }
  Shape values;
  for (Id item : items) {
    SHARDKIT_ASSIGN_OR_RETURN(const int64_t value, p.Int(item, what));
    if (value < 0) return p.Unexpected(item, what, "an int >= 0");
    values.push_back(value);
  }
  return values;
}

// The persistent id ("storage", storage class, key, location, numel): the dtype (typed storages)
// and the storage's byte size.
absl::Status ReadStorageId(const Pickle& p, Id id, bool untyped, Rebuild& out) {
  if (p.kind(id) != PickleKind::kPersistentId) return p.Unexpected(id, "storage", "a storage");
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> pid, p.Tuple(p.items(id)[0], "storage id", 5));
  SHARDKIT_ASSIGN_OR_RETURN(const std::string_view tag, p.Str(pid[0], "storage id"));
  if (tag != "storage") return p.Unexpected(pid[0], "storage id", "\"storage\"");
  const PickleGlobal kind = untyped ? PickleGlobal::kUntypedStorage : PickleGlobal::kTypedStorage;
  if (p.kind(pid[1]) != PickleKind::kGlobal || p.global(pid[1]) != kind) {
    return p.Unexpected(pid[1], "storage class",
                        untyped ? "torch.UntypedStorage (with _rebuild_tensor_v3)"
                                : "a typed storage (with _rebuild_tensor_v2)");
  }
  if (!untyped) out.dtype = p.dtype(pid[1]);
  SHARDKIT_ASSIGN_OR_RETURN(const std::string_view key, p.Str(pid[2], "storage key"));
  out.key = std::string(key);
  SHARDKIT_RETURN_IF_ERROR(p.Str(pid[3], "storage location").status());
  SHARDKIT_ASSIGN_OR_RETURN(const int64_t numel, p.Int(pid[4], "storage numel"));
  if (numel < 0) return p.Unexpected(pid[4], "storage numel", "an int >= 0");
  // Typed storages count elements, untyped ones bytes; the byte count of a real storage fits.
  const uint64_t element = untyped ? 1 : ElementSize(out.dtype);
  if (static_cast<uint64_t>(numel) > UINT64_MAX / element) {
    return p.Unexpected(pid[4], "storage numel", "a size that fits 64 bits");
  }
  out.storage_bytes = static_cast<uint64_t>(numel) * element;
  return absl::OkStatus();
}

// torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
// backward_hooks[, metadata]) or _v3(..., dtype[, metadata]).
absl::StatusOr<Rebuild> ReadRebuild(const Pickle& p) {
  const Id root = p.root();
  const bool v3 =
      p.kind(root) == PickleKind::kObject && p.global(root) == PickleGlobal::kRebuildTensorV3;
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<Id> args,
      p.ReduceArgs(root, v3 ? PickleGlobal::kRebuildTensorV3 : PickleGlobal::kRebuildTensorV2,
                   "the pickled object"));
  const size_t required = v3 ? 7 : 6;
  if (args.size() != required && args.size() != required + 1) {
    return p.Unexpected(p.args(root), "tensor rebuild arguments",
                        absl::StrCat("a tuple of ", required, " or ", required + 1));
  }
  Rebuild out;
  SHARDKIT_RETURN_IF_ERROR(ReadStorageId(p, args[0], v3, out));
  SHARDKIT_ASSIGN_OR_RETURN(out.storage_offset, p.Int(args[1], "storage offset"));
  if (out.storage_offset < 0) return p.Unexpected(args[1], "storage offset", "an int >= 0");
  SHARDKIT_ASSIGN_OR_RETURN(out.shape, ReadInts(p, args[2], "size"));
  SHARDKIT_ASSIGN_OR_RETURN(out.strides, ReadInts(p, args[3], "stride"));
  if (out.strides.size() != out.shape.size()) {
    return p.Unexpected(args[3], "stride", absl::StrCat("a tuple of ", out.shape.size()));
  }
  SHARDKIT_RETURN_IF_ERROR(p.Bool(args[4], "requires_grad").status());
  SHARDKIT_RETURN_IF_ERROR(
      p.ReduceArgs(args[5], PickleGlobal::kOrderedDict, "backward hooks", 0).status());
  if (v3) {
    if (p.kind(args[6]) != PickleKind::kGlobal || p.global(args[6]) != PickleGlobal::kDType) {
      return p.Unexpected(args[6], "dtype", "a torch dtype");
    }
    out.dtype = p.dtype(args[6]);
  }
  if (args.size() == required + 1 &&
      !(p.kind(args[required]) == PickleKind::kNone ||
        (p.kind(args[required]) == PickleKind::kDict && p.size(args[required]) == 0))) {
    return p.Unexpected(args[required], "tensor metadata",
                        "none (a tensor with conjugate or negative bits is not plain values)");
  }
  return out;
}

// Row-major strides for `shape`, dimensions of size 1 aside (as torch's is_contiguous).
bool IsRowMajor(const Shape& shape, const Shape& strides) {
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return true;
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// Where the tensor's elements lie in its storage: checked inside the storage record.
absl::StatusOr<TensorRecord> Place(const Rebuild& rebuild, const ZipRecord& storage, uint64_t base,
                                   const std::string& key) {
  TensorRecord record;
  record.dtype = rebuild.dtype;
  record.shape = rebuild.shape;
  record.strides = rebuild.strides;
  record.storage_offset = rebuild.storage_offset;
  record.storage_record_offset = base + storage.offset;
  record.storage_record_length = storage.size;
  const std::string what =
      absl::StrCat("tensor of size ", ShapeToString(rebuild.shape), ", stride ",
                   ShapeToString(rebuild.strides), ", storage offset ", rebuild.storage_offset);
  if (storage.size != rebuild.storage_bytes) {
    return Invalid(absl::StrCat("record data/", key, " has ", storage.size,
                                " bytes but data.pkl's storage has ", rebuild.storage_bytes));
  }
  SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize size, ComputeShapeSize(rebuild.shape, rebuild.dtype));
  const auto element = static_cast<unsigned __int128>(ElementSize(rebuild.dtype));
  record.row_major = IsRowMajor(rebuild.shape, rebuild.strides);
  unsigned __int128 span = 0;  // elements from the first to one past the last reached
  if (size.numel > 0) {
    span = 1;
    for (size_t d = 0; d < rebuild.shape.size(); ++d) {
      span += static_cast<unsigned __int128>(rebuild.shape[d] - 1) *
              static_cast<unsigned __int128>(rebuild.strides[d]);
    }
  }
  const unsigned __int128 end =
      (static_cast<unsigned __int128>(rebuild.storage_offset) + (size.numel > 0 ? span : 0)) *
      element;
  if (end > storage.size) {
    return Invalid(
        absl::StrCat("the ", what, " reaches past its storage's ", storage.size, " bytes"));
  }
  record.data_offset = record.storage_record_offset +
                       static_cast<uint64_t>(rebuild.storage_offset) * ElementSize(rebuild.dtype);
  record.data_length = static_cast<uint64_t>(span * element);
  return record;
}

absl::StatusOr<TensorRecord> Read(int fd, uint64_t offset, uint64_t length) {
  SHARDKIT_ASSIGN_OR_RETURN(const ZipDirectory zip,
                            ZipDirectory::Read(fd, offset, length, kMaxCentralDirectoryBytes));
  if (const ZipEntry* order = zip.Find("byteorder")) {
    SHARDKIT_ASSIGN_OR_RETURN(const std::string text, zip.ReadRecord(*order, 16));
    if (text != "little") {
      return Invalid(absl::StrCat("the archive's byteorder is ", QuoteName(text),
                                  ": only little-endian values are read"));
    }
  }
  const ZipEntry* pkl = zip.Find("data.pkl");
  if (pkl == nullptr) return Invalid(absl::StrCat("no ", zip.top(), "/data.pkl record"));
  SHARDKIT_ASSIGN_OR_RETURN(const ZipRecord pkl_record, zip.Locate(*pkl));
  SHARDKIT_ASSIGN_OR_RETURN(const std::string bytes, zip.ReadRecord(*pkl, kMaxDataPklBytes));
  absl::StatusOr<Rebuild> rebuild = [&]() -> absl::StatusOr<Rebuild> {
    SHARDKIT_ASSIGN_OR_RETURN(const Pickle pickle, Pickle::Parse(bytes));
    return ReadRebuild(pickle);
  }();
  if (!rebuild.ok()) {
    return Annotate(rebuild.status(),
                    absl::StrCat(zip.top(), "/data.pkl at byte ", offset + pkl_record.offset));
  }
  const ZipEntry* storage = zip.Find("data/" + rebuild->key);
  if (storage == nullptr) {
    return Invalid(
        absl::StrCat("no ", zip.top(), "/data/", rebuild->key, " record for data.pkl's storage"));
  }
  SHARDKIT_ASSIGN_OR_RETURN(const ZipRecord storage_record, zip.Locate(*storage));
  return Place(*rebuild, storage_record, offset, rebuild->key);
}

}  // namespace

absl::StatusOr<TensorRecord> ReadTensorRecord(int fd, uint64_t file_size, uint64_t offset,
                                              uint64_t length, std::string_view source) {
  const std::string where =
      absl::StrCat(std::string(source), " item at bytes [", offset, ", ",
                   length <= UINT64_MAX - offset ? offset + length : UINT64_MAX, ")");
  if (offset > file_size || length > file_size - offset) {
    return Invalid(absl::StrCat(where, ": runs past the end of the file (", file_size, " bytes)"));
  }
  absl::StatusOr<TensorRecord> record = Read(fd, offset, length);
  if (!record.ok()) return Annotate(record.status(), where);
  return record;
}

}  // namespace shardkit::torch_zip
