#include "integration/formats/dcp/test_util.h"

#include <cstdlib>
#include <string>

#include "integration/formats/pickle/pickle_writer.h"

namespace shardkit::dcp::testing {

using ::shardkit::pickle::PickleWriter;
namespace {

constexpr char kMeta[] = "torch.distributed.checkpoint.metadata";

}  // namespace

std::string FixturePath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir == nullptr ? "." : srcdir) +
         "/shardkit/integration/formats/dcp/testdata/" + name;
}

std::string FakeMetadata(const std::vector<FakeTensor>& tensors, const FakeOptions& options) {
  PickleWriter w;
  w.BeginDataclass(kMeta, "Metadata");
  w.MemoStr("state_dict_metadata");
  w.Raw("}(");
  for (const FakeTensor& tensor : tensors) {
    w.MemoStr(tensor.fqn);
    w.BeginDataclass(kMeta, "TensorStorageMetadata");
    w.MemoStr("properties");
    w.Global(kMeta, "TensorProperties");
    w.Raw(")\x81(");
    w.Global("torch", tensor.dtype);
    w.Global("torch.serialization", "_get_layout");
    w.MemoStr(options.layout);
    w.Raw("\x85R\x89");
    w.Global(kMeta, "_MEM_FORMAT_ENCODING");
    w.Int(0);
    w.Raw("\x85R\x89Ntb");
    w.MemoStr("size");
    w.Size(tensor.shape);
    w.MemoStr("chunks");
    w.Raw("](");
    for (size_t c = 0; c < tensor.chunk_count(); ++c) {
      if (options.share_chunk && c > 0) {
        w.Get("chunk " + tensor.fqn);
        continue;
      }
      const FakeChunk chunk = tensor.chunk(c);
      w.BeginDataclass(kMeta, "ChunkStorageMetadata", "chunk " + tensor.fqn);
      w.MemoStr("offsets");
      w.Size(chunk.offsets);
      w.MemoStr("sizes");
      w.Size(chunk.sizes);
      if (!options.extra_chunk_field.empty()) {
        w.MemoStr(options.extra_chunk_field);
        w.Raw("N");
      }
      w.EndDataclass();
    }
    w.Raw("e");
    w.EndDataclass();
  }
  w.Raw("u");
  w.MemoStr("storage_data");
  w.Raw("}(");
  auto storage = [&](const std::string& fqn, const Shape& offsets, int64_t index,
                     const FakeChunk& chunk) {
    w.BeginDataclass(kMeta, "MetadataIndex");
    w.MemoStr("fqn");
    w.MemoStr(fqn);
    w.MemoStr("offset");
    w.Size(offsets);
    w.MemoStr("index");
    w.Int(index);
    w.EndDataclass();
    w.BeginDataclass("torch.distributed.checkpoint.filesystem", "_StorageInfo");
    w.MemoStr("relative_path");
    w.MemoStr(chunk.file);
    w.MemoStr("offset");
    w.Int(chunk.offset);
    w.MemoStr("length");
    w.Int(chunk.length);
    if (!options.transform_descriptors.empty()) {
      w.MemoStr("transform_descriptors");
      if (options.transform_descriptors == "int") {
        w.Int(5);
      } else {
        w.Raw("](");
        w.Str("stream.zstd");
        w.Raw("e");
      }
    }
    w.EndDataclass();
  };
  for (const FakeTensor& tensor : tensors) {
    const size_t count = options.share_chunk ? 1 : tensor.chunk_count();
    for (size_t c = 0; c < count; ++c) {
      const FakeChunk chunk = tensor.chunk(c);
      storage(tensor.fqn, chunk.offsets, static_cast<int64_t>(c), chunk);
    }
  }
  if (options.extra_storage_entry) storage("stray", {0}, 0, FakeChunk{});
  w.Raw("u");
  w.MemoStr("planner_data");
  w.Raw("N");
  w.MemoStr("version");
  w.Str("1.0.0");
  w.EndDataclass();
  return w.Finish();
}

}  // namespace shardkit::dcp::testing
