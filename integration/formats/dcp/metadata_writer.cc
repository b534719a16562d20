#include "integration/formats/dcp/metadata_writer.h"

#include <string>
#include <variant>
#include <vector>

#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "integration/formats/pickle/pickle_writer.h"

namespace shardkit::dcp {

using ::shardkit::pickle::PickleWriter;
namespace {

constexpr char kMeta[] = "torch.distributed.checkpoint.metadata";
constexpr char kFilesystem[] = "torch.distributed.checkpoint.filesystem";

// TensorProperties, pickled by its __getstate__: NEWOBJ, then BUILD with the tuple (dtype,
// _get_layout("torch.strided"), requires_grad, _MEM_FORMAT_ENCODING(0), pin_memory, strides).
void WriteProperties(PickleWriter& w, const TensorEntry& tensor) {
  w.Global(kMeta, "TensorProperties");
  w.Raw(")\x81");
  w.BeginTuple(6);
  w.Global("torch", DTypeName(tensor.dtype));
  w.Global("torch.serialization", "_get_layout");
  w.MemoStr("torch.strided");
  w.Raw("\x85R");
  w.Bool(false);
  w.Global(kMeta, "_MEM_FORMAT_ENCODING");
  w.Int(0);  // TORCH_CONTIGUOUS_FORMAT
  w.Raw("\x85R");
  w.Bool(false);
  w.IntTuple(ContiguousStrides(tensor.shape));
  w.EndTuple(6);
  w.Raw("b");
}

void WriteTensor(PickleWriter& w, const TensorEntry& tensor) {
  w.MemoStr(tensor.fqn);
  w.BeginDataclass(kMeta, "TensorStorageMetadata");
  w.MemoStr("properties");
  WriteProperties(w, tensor);
  w.MemoStr("size");
  w.Size(tensor.shape);
  w.MemoStr("chunks");
  w.Raw("](");
  for (const Chunk& chunk : tensor.chunks) {
    w.BeginDataclass(kMeta, "ChunkStorageMetadata");
    w.MemoStr("offsets");
    w.Size(chunk.offsets);
    w.MemoStr("sizes");
    w.Size(chunk.sizes);
    w.EndDataclass();
  }
  w.Raw("e");
  w.EndDataclass();
}

// planner_data[fqn]: the recorded path, else (fqn,).
void WritePath(PickleWriter& w, const Metadata& metadata, const std::string& fqn) {
  w.MemoStr(fqn);
  auto it = metadata.planner_data.find(fqn);
  if (it == metadata.planner_data.end()) {
    w.BeginTuple(1);
    w.MemoStr(fqn);
    w.EndTuple(1);
    return;
  }
  const std::vector<PathStep>& path = it->second;
  w.BeginTuple(path.size());
  for (const PathStep& step : path) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      w.MemoStr(*key);
    } else {
      w.Int(std::get<int64_t>(step));
    }
  }
  w.EndTuple(path.size());
}

void WriteStorageInfo(PickleWriter& w, const StorageItem& item) {
  w.BeginDataclass(kFilesystem, "_StorageInfo");
  w.MemoStr("relative_path");
  w.MemoStr(item.file);
  w.MemoStr("offset");
  w.Int(static_cast<int64_t>(item.offset));
  w.MemoStr("length");
  w.Int(static_cast<int64_t>(item.length));
  w.EndDataclass();
}

void WriteStorage(PickleWriter& w, const TensorEntry& tensor, size_t index) {
  const Chunk& chunk = tensor.chunks[index];
  w.BeginDataclass(kMeta, "MetadataIndex");
  w.MemoStr("fqn");
  w.MemoStr(tensor.fqn);
  w.MemoStr("index");
  w.Int(static_cast<int64_t>(index));
  w.MemoStr("offset");
  w.Size(chunk.offsets);
  w.EndDataclass();
  WriteStorageInfo(w, chunk.item);
}

// A non-tensor item: BytesStorageMetadata() (a dataclass without fields).
void WriteBytes(PickleWriter& w, const BytesEntry& bytes) {
  w.MemoStr(bytes.fqn);
  w.BeginDataclass(kMeta, "BytesStorageMetadata");
  w.EndDataclass();
}

void WriteBytesStorage(PickleWriter& w, const BytesEntry& bytes) {
  w.BeginDataclass(kMeta, "MetadataIndex");  // MetadataIndex(fqn): no offset, no index
  w.MemoStr("fqn");
  w.MemoStr(bytes.fqn);
  w.MemoStr("offset");
  w.None();
  w.MemoStr("index");
  w.None();
  w.EndDataclass();
  WriteStorageInfo(w, bytes.item);
}

}  // namespace

std::string SerializeMetadata(const Metadata& metadata) {
  PickleWriter w;
  w.BeginDataclass(kMeta, "Metadata");
  w.MemoStr("state_dict_metadata");
  w.Raw("}(");
  for (const TensorEntry& tensor : metadata.tensors) WriteTensor(w, tensor);
  for (const BytesEntry& bytes : metadata.bytes) WriteBytes(w, bytes);
  w.Raw("u");
  w.MemoStr("planner_data");
  w.Raw("}(");
  for (const TensorEntry& tensor : metadata.tensors) WritePath(w, metadata, tensor.fqn);
  for (const BytesEntry& bytes : metadata.bytes) WritePath(w, metadata, bytes.fqn);
  w.Raw("u");
  w.MemoStr("storage_data");
  w.Raw("}(");
  for (const TensorEntry& tensor : metadata.tensors) {
    for (size_t c = 0; c < tensor.chunks.size(); ++c) WriteStorage(w, tensor, c);
  }
  for (const BytesEntry& bytes : metadata.bytes) WriteBytesStorage(w, bytes);
  w.Raw("u");
  w.MemoStr("storage_meta");
  w.None();
  w.MemoStr("version");
  w.MemoStr(kDcpMetadataVersion);
  w.EndDataclass();
  return w.Finish();
}

}  // namespace shardkit::dcp
