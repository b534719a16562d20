#include "integration/formats/pickle/internal/pickle_globals.h"

#include <array>
#include <utility>

namespace shardkit::pickle {
namespace internal {
namespace {

struct AllowedGlobal {
  std::string_view module;
  std::string_view name;
  PickleGlobal global;
  GlobalUse use;
};

constexpr std::string_view kDcpMetadata = "torch.distributed.checkpoint.metadata";

constexpr std::array<AllowedGlobal, 19> kAllowed = {{
    {kDcpMetadata, "Metadata", PickleGlobal::kMetadata, GlobalUse::kNewObj},
    {kDcpMetadata, "TensorStorageMetadata", PickleGlobal::kTensorStorageMetadata,
     GlobalUse::kNewObj},
    {kDcpMetadata, "TensorProperties", PickleGlobal::kTensorProperties, GlobalUse::kNewObj},
    {kDcpMetadata, "ChunkStorageMetadata", PickleGlobal::kChunkStorageMetadata, GlobalUse::kNewObj},
    {kDcpMetadata, "BytesStorageMetadata", PickleGlobal::kBytesStorageMetadata, GlobalUse::kNewObj},
    {kDcpMetadata, "MetadataIndex", PickleGlobal::kMetadataIndex, GlobalUse::kNewObj},
    {kDcpMetadata, "StorageMeta", PickleGlobal::kStorageMeta, GlobalUse::kNewObj},
    {kDcpMetadata, "_MEM_FORMAT_ENCODING", PickleGlobal::kMemFormatEncoding, GlobalUse::kReduce},
    {"torch.distributed.checkpoint.filesystem", "_StorageInfo", PickleGlobal::kStorageInfo,
     GlobalUse::kNewObj},
    {"torch", "Size", PickleGlobal::kSize, GlobalUse::kReduce},
    {"torch.serialization", "_get_layout", PickleGlobal::kGetLayout, GlobalUse::kReduce},
    {"pathlib", "PosixPath", PickleGlobal::kPosixPath, GlobalUse::kReduce},
    {"collections", "OrderedDict", PickleGlobal::kOrderedDict, GlobalUse::kReduce},
    {"torch._utils", "_rebuild_tensor_v2", PickleGlobal::kRebuildTensorV2, GlobalUse::kReduce},
    {"torch._utils", "_rebuild_tensor_v3", PickleGlobal::kRebuildTensorV3, GlobalUse::kReduce},
    {"torch", "UntypedStorage", PickleGlobal::kUntypedStorage, GlobalUse::kValue},
    {"torch.storage", "UntypedStorage", PickleGlobal::kUntypedStorage, GlobalUse::kValue},
    // Families: dtypes and typed storages are matched by name below.
    {"torch", "<dtype>", PickleGlobal::kDType, GlobalUse::kValue},
    {"torch", "<typed storage>", PickleGlobal::kTypedStorage, GlobalUse::kValue},
}};

// torch's legacy typed storage classes that have a shardkit dtype.
constexpr std::array<std::pair<std::string_view, DType>, 11> kTypedStorages = {{
    {"DoubleStorage", DType::kFloat64},
    {"FloatStorage", DType::kFloat32},
    {"HalfStorage", DType::kFloat16},
    {"BFloat16Storage", DType::kBFloat16},
    {"LongStorage", DType::kInt64},
    {"IntStorage", DType::kInt32},
    {"ShortStorage", DType::kInt16},
    {"CharStorage", DType::kInt8},
    {"ByteStorage", DType::kUInt8},
    {"BoolStorage", DType::kBool},
    {"ComplexFloatStorage", DType::kComplex64},
}};

}  // namespace

GlobalUse UseOf(PickleGlobal global) {
  for (const AllowedGlobal& allowed : kAllowed) {
    if (allowed.global == global) return allowed.use;
  }
  return GlobalUse::kValue;
}

namespace {

// A torch dtype by its pickled name (str(dtype) without "torch."): shardkit's DTypeName spells
// every whole-byte dtype as PyTorch does.
std::optional<DType> DTypeByTorchName(std::string_view name) {
  for (DType dtype : kAllDTypes) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ResolvedGlobal> ResolveGlobal(std::string_view module, std::string_view name) {
  for (const AllowedGlobal& allowed : kAllowed) {
    if (allowed.module == module && allowed.name == name) return ResolvedGlobal{allowed.global};
  }
  if (module != "torch") return std::nullopt;
  if (std::optional<DType> dtype = DTypeByTorchName(name)) {
    return ResolvedGlobal{PickleGlobal::kDType, *dtype};
  }
  for (const auto& [storage, dtype] : kTypedStorages) {
    if (storage == name) return ResolvedGlobal{PickleGlobal::kTypedStorage, dtype};
  }
  return std::nullopt;
}

std::optional<std::string_view> TypedStorageName(DType dtype) {
  for (const auto& [storage, storage_dtype] : kTypedStorages) {
    if (storage_dtype == dtype) return storage;
  }
  return std::nullopt;
}

}  // namespace internal

std::string_view PickleGlobalName(PickleGlobal global) {
  switch (global) {
    case PickleGlobal::kDType:
      return "torch dtype";
    case PickleGlobal::kTypedStorage:
      return "torch typed storage";
    case PickleGlobal::kMetadata:
      return "torch.distributed.checkpoint.metadata.Metadata";
    case PickleGlobal::kTensorStorageMetadata:
      return "torch.distributed.checkpoint.metadata.TensorStorageMetadata";
    case PickleGlobal::kTensorProperties:
      return "torch.distributed.checkpoint.metadata.TensorProperties";
    case PickleGlobal::kChunkStorageMetadata:
      return "torch.distributed.checkpoint.metadata.ChunkStorageMetadata";
    case PickleGlobal::kBytesStorageMetadata:
      return "torch.distributed.checkpoint.metadata.BytesStorageMetadata";
    case PickleGlobal::kMetadataIndex:
      return "torch.distributed.checkpoint.metadata.MetadataIndex";
    case PickleGlobal::kStorageMeta:
      return "torch.distributed.checkpoint.metadata.StorageMeta";
    case PickleGlobal::kMemFormatEncoding:
      return "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING";
    case PickleGlobal::kStorageInfo:
      return "torch.distributed.checkpoint.filesystem._StorageInfo";
    case PickleGlobal::kSize:
      return "torch.Size";
    case PickleGlobal::kGetLayout:
      return "torch.serialization._get_layout";
    case PickleGlobal::kPosixPath:
      return "pathlib.PosixPath";
    case PickleGlobal::kOrderedDict:
      return "collections.OrderedDict";
    case PickleGlobal::kRebuildTensorV2:
      return "torch._utils._rebuild_tensor_v2";
    case PickleGlobal::kRebuildTensorV3:
      return "torch._utils._rebuild_tensor_v3";
    case PickleGlobal::kUntypedStorage:
      return "torch.UntypedStorage";
  }
  return "?";
}

}  // namespace shardkit::pickle
