// Test tool of dcp_writer_torch_test.py: writes a tiny DCP checkpoint by hand with the writers
// (metadata_writer.h, torch_zip_writer.h) — F32 split in 2 chunks along dim 0, BF16, I64, FP8,
// U16, a 0-dim and an empty tensor, all items in one __0_0.distcp — and DIR/manifest.json, what
// torch should find: every tensor's row-major bytes and every item's range and bytes (hex).
//
//   write_dcp_sample DIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/dcp/metadata_writer.h"
#include "integration/formats/torch_zip/torch_zip_writer.h"

namespace shardkit::dcp {

using ::shardkit::torch_zip::MakeTensorArchive;
using ::shardkit::torch_zip::TensorArchive;
namespace {

struct Sample {
  std::string fqn;
  DType dtype;
  Shape shape;
  int chunks;  // split evenly along dim 0
};

std::string Values(size_t t, uint64_t bytes) {
  std::string out(bytes, '\0');
  for (uint64_t i = 0; i < bytes; ++i) out[i] = static_cast<char>(i * 7 + 3 + t * 13);
  return out;
}

std::string Ints(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

int Run(const std::string& dir) {
  const std::vector<Sample> samples = {{"model.layers.0.weight", DType::kFloat32, {4, 6}, 2},
                                       {"bf16", DType::kBFloat16, {3, 5}, 1},
                                       {"ids", DType::kInt64, {5}, 1},
                                       {"fp8", DType::kFloat8E4M3, {7}, 1},
                                       {"u16", DType::kUInt16, {2, 2}, 1},
                                       {"scalar", DType::kFloat32, {}, 1},
                                       {"empty", DType::kFloat32, {0, 3}, 1}};
  Metadata metadata;
  std::string file, tensors_json, items_json;
  for (size_t t = 0; t < samples.size(); ++t) {
    const Sample& s = samples[t];
    const ShapeSize size = *ComputeShapeSize(s.shape, s.dtype);
    const std::string values = Values(t, size.nbytes);
    TensorEntry entry{s.fqn, s.dtype, s.shape, {}};
    const int64_t rows = s.shape.empty() ? 1 : s.shape[0];
    const uint64_t row_bytes = rows == 0 ? 0 : size.nbytes / rows;
    for (int c = 0; c < s.chunks; ++c) {
      Chunk chunk;
      chunk.offsets = Shape(s.shape.size(), 0);
      chunk.sizes = s.shape;
      if (!s.shape.empty()) {
        chunk.offsets[0] = rows / s.chunks * c;
        chunk.sizes[0] = rows / s.chunks;
      }
      const int64_t first = s.shape.empty() ? 0 : chunk.offsets[0];
      const int64_t count = s.shape.empty() ? 1 : chunk.sizes[0];
      const std::string part = values.substr(first * row_bytes, count * row_bytes);
      TensorArchive archive = *MakeTensorArchive(s.dtype, chunk.sizes);
      chunk.item = {"__0_0.distcp", file.size(), archive.size()};
      file += archive.prefix + part + archive.suffix;
      absl::StrAppend(&items_json, items_json.empty() ? "" : ",\n", "{\"fqn\": \"", s.fqn,
                      "\", \"offsets\": ", Ints(chunk.offsets), ", \"sizes\": ", Ints(chunk.sizes),
                      ", \"offset\": ", chunk.item.offset, ", \"length\": ", chunk.item.length,
                      ", \"hex\": \"", absl::BytesToHexString(part), "\"}");
      entry.chunks.push_back(chunk);
    }
    metadata.tensors.push_back(entry);
    absl::StrAppend(&tensors_json, tensors_json.empty() ? "" : ",\n", "{\"fqn\": \"", s.fqn,
                    "\", \"dtype\": \"", std::string(DTypeName(s.dtype)),
                    "\", \"shape\": ", Ints(s.shape), ", \"hex\": \"",
                    absl::BytesToHexString(values), "\"}");
  }
  std::ofstream(dir + "/__0_0.distcp", std::ios::binary) << file;
  std::ofstream(dir + "/.metadata", std::ios::binary) << SerializeMetadata(metadata);
  std::ofstream(dir + "/manifest.json")
      << "{\"tensors\": [" << tensors_json << "],\n\"items\": [" << items_json << "]}\n";
  return 0;
}

}  // namespace
}  // namespace shardkit::dcp

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_dcp_sample DIR\n");
    return 2;
  }
  return shardkit::dcp::Run(argv[1]);
}
