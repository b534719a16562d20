#include "integration/formats/dcp/internal/metadata_pickle.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"

namespace shardkit::dcp::internal {

using ::shardkit::pickle::Pickle;
using ::shardkit::pickle::PickleGlobal;
using ::shardkit::pickle::PickleKind;
namespace {

using Id = Pickle::Id;
constexpr Id kNoValue = Pickle::kNoValue;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// storage_data is keyed by MetadataIndex(fqn, offset): a chunk's offsets, or none for a bytes
// item (kNoOffset, as offsets are never negative).
using StorageKey = std::pair<std::string_view, Shape>;
const Shape kNoOffset = {-1};

struct StorageEntry {
  StorageItem item;
  Id key = kNoValue;  // the MetadataIndex, for messages
  bool used = false;
};
using StorageMap = absl::flat_hash_map<StorageKey, StorageEntry>;

std::string KeyText(const StorageKey& key) {
  return absl::StrCat(QuoteName(key.first),
                      key.second == kNoOffset ? "" : " at offsets " + ShapeToString(key.second));
}

// torch.Size((d0, d1, ...)): every dim an int >= 0, at most kMaxDims.
absl::StatusOr<Shape> ReadSize(const Pickle& p, Id id, const char* what) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> args, p.ReduceArgs(id, PickleGlobal::kSize, what, 1));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> dims, p.Tuple(args[0], what));
  if (dims.size() > kMaxDims) {
    return Invalid(absl::StrCat("pickle byte ", p.offset(id), ": ", what, " has ", dims.size(),
                                " dimensions (at most ", kMaxDims, ")"));
  }
  Shape shape;
  shape.reserve(dims.size());
  for (Id dim : dims) {
    SHARDKIT_ASSIGN_OR_RETURN(const int64_t value, p.Int(dim, what));
    if (value < 0) return p.Unexpected(dim, what, "an int >= 0");
    shape.push_back(value);
  }
  return shape;
}

absl::StatusOr<uint64_t> ReadUnsigned(const Pickle& p, Id id, const char* what) {
  if (id == kNoValue) return Invalid(absl::StrCat(what, " is missing"));
  SHARDKIT_ASSIGN_OR_RETURN(const int64_t value, p.Int(id, what));
  if (value < 0) return p.Unexpected(id, what, "an int >= 0");
  return static_cast<uint64_t>(value);
}

// A value that may be absent or None.
bool IsNone(const Pickle& p, Id id) { return id == kNoValue || p.kind(id) == PickleKind::kNone; }

// _StorageInfo(relative_path, offset, length[, transform_descriptors]).
absl::StatusOr<StorageItem> ReadStorageInfo(const Pickle& p, Id id) {
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<Id> f,
      p.DataclassFields(id, PickleGlobal::kStorageInfo,
                        {"relative_path", "offset", "length", "transform_descriptors"},
                        "_StorageInfo"));
  if (f[0] == kNoValue) return Invalid("relative_path is missing");
  StorageItem item;
  SHARDKIT_ASSIGN_OR_RETURN(const std::string_view file, p.Str(f[0], "relative_path"));
  item.file = std::string(file);
  SHARDKIT_ASSIGN_OR_RETURN(item.offset, ReadUnsigned(p, f[1], "offset"));
  SHARDKIT_ASSIGN_OR_RETURN(item.length, ReadUnsigned(p, f[2], "length"));
  if (!IsNone(p, f[3]) && p.kind(f[3]) != PickleKind::kList && p.kind(f[3]) != PickleKind::kTuple) {
    return p.Unexpected(f[3], "transform_descriptors", "a list");
  }
  if (!IsNone(p, f[3]) && p.size(f[3]) != 0) {
    return Invalid(absl::StrCat(
        "transform_descriptors (pickle byte ", p.offset(f[3]),
        "): its bytes went through a DCP stream transform (compression), so they cannot be read "
        "by range; save without _extensions"));
  }
  return item;
}

// MetadataIndex(fqn, offset, index) as a key.
absl::StatusOr<StorageKey> ReadIndex(const Pickle& p, Id id) {
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<Id> f,
      p.DataclassFields(id, PickleGlobal::kMetadataIndex, {"fqn", "offset", "index"}, "key"));
  if (f[0] == kNoValue) return p.Unexpected(id, "key", "a MetadataIndex with an fqn");
  SHARDKIT_ASSIGN_OR_RETURN(const std::string_view fqn, p.Str(f[0], "key fqn"));
  StorageKey key{fqn, kNoOffset};
  if (!IsNone(p, f[1])) {
    SHARDKIT_ASSIGN_OR_RETURN(key.second, ReadSize(p, f[1], "key offset"));
  }
  if (!IsNone(p, f[2])) SHARDKIT_RETURN_IF_ERROR(p.Int(f[2], "key index").status());
  return key;
}

absl::StatusOr<StorageMap> ReadStorageData(const Pickle& p, Id dict) {
  if (dict == kNoValue || p.kind(dict) != PickleKind::kDict) {
    return dict == kNoValue ? Invalid("Metadata has no storage_data")
                            : p.Unexpected(dict, "Metadata.storage_data", "a dict");
  }
  StorageMap map;
  const std::vector<Id> pairs = p.items(dict);
  map.reserve(pairs.size() / 2);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    absl::StatusOr<StorageKey> key = ReadIndex(p, pairs[i]);
    if (!key.ok()) return Annotate(key.status(), absl::StrCat("storage_data item ", i / 2));
    absl::StatusOr<StorageItem> item = ReadStorageInfo(p, pairs[i + 1]);
    if (!item.ok()) {
      return Annotate(item.status(), absl::StrCat("storage_data[", KeyText(*key), "]"));
    }
    auto [it, inserted] = map.try_emplace(*std::move(key));
    if (!inserted) {
      return Invalid(absl::StrCat("pickle byte ", p.offset(pairs[i]), ": storage_data[",
                                  KeyText(it->first), "] twice"));
    }
    it->second.item = *std::move(item);
    it->second.key = pairs[i];
  }
  return map;
}

// The storage item of `key`, used once. `what` names the chunk or bytes item in messages.
absl::StatusOr<StorageItem> TakeItem(StorageMap& map, const StorageKey& key,
                                     absl::FunctionRef<std::string()> what) {
  auto it = map.find(key);
  if (it == map.end()) return Invalid(absl::StrCat(what(), " has no storage_data entry"));
  if (it->second.used) {
    return Invalid(
        absl::StrCat(what(), ": its storage_data entry ", KeyText(key), " is another chunk's too"));
  }
  it->second.used = true;
  return it->second.item;
}

// TensorProperties' state: (dtype, layout, requires_grad, memory format, pin_memory[, strides]).
absl::StatusOr<DType> ReadProperties(const Pickle& p, Id id) {
  constexpr char what[] = "properties";
  if (p.kind(id) != PickleKind::kObject || p.global(id) != PickleGlobal::kTensorProperties ||
      p.state(id) == kNoValue) {
    return p.Unexpected(id, what, "a TensorProperties object with its state");
  }
  const Id state = p.state(id);
  if (p.kind(state) != PickleKind::kTuple || (p.size(state) != 5 && p.size(state) != 6)) {
    return p.Unexpected(state, what, "a tuple of 5 or 6");
  }
  const std::vector<Id> s = p.items(state);
  if (p.kind(s[0]) != PickleKind::kGlobal || p.global(s[0]) != PickleGlobal::kDType) {
    return p.Unexpected(s[0], "properties dtype", "a torch dtype");
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> layout,
                            p.ReduceArgs(s[1], PickleGlobal::kGetLayout, "properties layout", 1));
  SHARDKIT_ASSIGN_OR_RETURN(const std::string_view layout_name, p.Str(layout[0], what));
  if (layout_name != "torch.strided") {
    return Invalid(absl::StrCat("properties: layout ", QuoteName(layout_name),
                                " (only torch.strided tensors are read)"));
  }
  SHARDKIT_RETURN_IF_ERROR(p.Bool(s[2], "properties requires_grad").status());
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<Id> format,
      p.ReduceArgs(s[3], PickleGlobal::kMemFormatEncoding, "properties memory format", 1));
  SHARDKIT_RETURN_IF_ERROR(p.Int(format[0], "properties memory format").status());
  SHARDKIT_RETURN_IF_ERROR(p.Bool(s[4], "properties pin_memory").status());
  if (s.size() == 6 && !IsNone(p, s[5])) {
    SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> strides, p.Tuple(s[5], "properties strides"));
    for (Id stride : strides)
      SHARDKIT_RETURN_IF_ERROR(p.Int(stride, "properties strides").status());
  }
  return p.dtype(s[0]);
}

absl::StatusOr<Chunk> ReadChunk(const Pickle& p, Id id) {
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<Id> f,
      p.DataclassFields(id, PickleGlobal::kChunkStorageMetadata, {"offsets", "sizes"}, "chunk"));
  if (f[0] == kNoValue || f[1] == kNoValue) return Invalid("needs offsets and sizes");
  Chunk chunk;
  SHARDKIT_ASSIGN_OR_RETURN(chunk.offsets, ReadSize(p, f[0], "offsets"));
  SHARDKIT_ASSIGN_OR_RETURN(chunk.sizes, ReadSize(p, f[1], "sizes"));
  return chunk;
}

// A TensorStorageMetadata, its chunks joined with their items. Errors name no tensor: the caller
// adds it.
absl::StatusOr<TensorEntry> ReadTensor(const Pickle& p, std::string_view fqn, Id id,
                                       StorageMap& storage) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> f,
                            p.DataclassFields(id, PickleGlobal::kTensorStorageMetadata,
                                              {"properties", "size", "chunks"}, "value"));
  if (f[0] == kNoValue || f[1] == kNoValue || f[2] == kNoValue) {
    return Invalid(
        absl::StrCat("pickle byte ", p.offset(id), ": needs properties, size and chunks"));
  }
  TensorEntry tensor{std::string(fqn), DType::kFloat32, {}, {}};
  SHARDKIT_ASSIGN_OR_RETURN(tensor.dtype, ReadProperties(p, f[0]));
  SHARDKIT_ASSIGN_OR_RETURN(tensor.shape, ReadSize(p, f[1], "size"));
  if (p.kind(f[2]) != PickleKind::kList) return p.Unexpected(f[2], "chunks", "a list");
  const std::vector<Id> chunks = p.items(f[2]);
  tensor.chunks.reserve(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    auto what = [c] { return absl::StrCat("chunk ", c); };
    absl::StatusOr<Chunk> chunk = ReadChunk(p, chunks[c]);
    if (!chunk.ok()) return Annotate(chunk.status(), what());
    SHARDKIT_ASSIGN_OR_RETURN(chunk->item, TakeItem(storage, {fqn, chunk->offsets}, what));
    tensor.chunks.push_back(*std::move(chunk));
  }
  return tensor;
}

absl::Status ReadStateDict(const Pickle& p, Id dict, StorageMap& storage, Metadata& out) {
  if (dict == kNoValue) return Invalid("Metadata has no state_dict_metadata");
  if (p.kind(dict) != PickleKind::kDict) {
    return p.Unexpected(dict, "Metadata.state_dict_metadata", "a dict");
  }
  const std::vector<Id> pairs = p.items(dict);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    SHARDKIT_ASSIGN_OR_RETURN(const std::string_view fqn,
                              p.Str(pairs[i], "state_dict_metadata key"));
    const Id value = pairs[i + 1];
    if (p.kind(value) == PickleKind::kObject &&
        p.global(value) == PickleGlobal::kBytesStorageMetadata) {
      auto what = [fqn] { return absl::StrCat("bytes item ", QuoteName(fqn)); };
      if (absl::Status s = p.DataclassFields(value, PickleGlobal::kBytesStorageMetadata, {},
                                             "BytesStorageMetadata")
                               .status();
          !s.ok()) {
        return Annotate(s, what());
      }
      SHARDKIT_ASSIGN_OR_RETURN(StorageItem item, TakeItem(storage, {fqn, kNoOffset}, what));
      out.bytes.push_back({std::string(fqn), std::move(item)});
    } else {
      absl::StatusOr<TensorEntry> tensor = ReadTensor(p, fqn, value, storage);
      if (!tensor.ok()) {
        return Annotate(tensor.status(), absl::StrCat("tensor ", QuoteName(fqn)));
      }
      out.tensors.push_back(*std::move(tensor));
    }
  }
  return absl::OkStatus();
}

// DefaultSavePlanner's planner_data: {fqn: (key or index, ...)}, or None.
absl::Status ReadPlannerData(const Pickle& p, Id id, Metadata& out) {
  if (IsNone(p, id)) return absl::OkStatus();
  if (p.kind(id) != PickleKind::kDict) return p.Unexpected(id, "Metadata.planner_data", "a dict");
  const std::vector<Id> pairs = p.items(id);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    SHARDKIT_ASSIGN_OR_RETURN(const std::string_view fqn, p.Str(pairs[i], "planner_data key"));
    const std::string what = absl::StrCat("planner_data[", QuoteName(fqn), "]");
    SHARDKIT_ASSIGN_OR_RETURN(std::vector<Id> steps, p.Tuple(pairs[i + 1], what));
    std::vector<PathStep> path;
    path.reserve(steps.size());
    for (Id step : steps) {
      if (p.kind(step) == PickleKind::kInt) {
        path.emplace_back(p.int_value(step));
      } else {
        SHARDKIT_ASSIGN_OR_RETURN(const std::string_view key, p.Str(step, what));
        path.emplace_back(std::string(key));
      }
    }
    if (!out.planner_data.emplace(std::string(fqn), std::move(path)).second) {
      return Invalid(absl::StrCat(what, " twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStorageMeta(const Pickle& p, Id id) {
  if (IsNone(p, id)) return absl::OkStatus();
  return p
      .DataclassFields(id, PickleGlobal::kStorageMeta,
                       {"checkpoint_id", "save_id", "load_id", "modules"}, "Metadata.storage_meta")
      .status();
}

template <typename Entry>
absl::Status SortByFqn(std::vector<Entry>& entries, std::string_view kind) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.fqn < b.fqn; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].fqn == entries[i - 1].fqn) {
      return Invalid(absl::StrCat(std::string(kind), " ", QuoteName(entries[i].fqn), " twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Metadata> MetadataFromPickle(const Pickle& p) {
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<Id> f, p.DataclassFields(p.root(), PickleGlobal::kMetadata,
                                           {"state_dict_metadata", "planner_data", "storage_data",
                                            "storage_meta", "version"},
                                           "Metadata"));
  Metadata out;
  SHARDKIT_ASSIGN_OR_RETURN(StorageMap storage, ReadStorageData(p, f[2]));
  SHARDKIT_RETURN_IF_ERROR(ReadStateDict(p, f[0], storage, out));
  for (const auto& [key, entry] : storage) {
    if (!entry.used) {
      return Invalid(absl::StrCat("pickle byte ", p.offset(entry.key), ": storage_data[",
                                  KeyText(key), "] belongs to no chunk or bytes item"));
    }
  }
  SHARDKIT_RETURN_IF_ERROR(ReadPlannerData(p, f[1], out));
  SHARDKIT_RETURN_IF_ERROR(CheckStorageMeta(p, f[3]));
  if (!IsNone(p, f[4])) {
    SHARDKIT_ASSIGN_OR_RETURN(const std::string_view version, p.Str(f[4], "Metadata.version"));
    out.version = std::string(version);
  }
  // A key twice in state_dict_metadata (a dict pickled with a repeated key) is refused, not merged.
  SHARDKIT_RETURN_IF_ERROR(SortByFqn(out.tensors, "tensor"));
  SHARDKIT_RETURN_IF_ERROR(SortByFqn(out.bytes, "bytes item"));
  return out;
}

}  // namespace shardkit::dcp::internal
