// libFuzzer target for the safetensors reader: the input is a whole file (8-byte little-endian
// header length, JSON header, data region), opened through safetensors::Reader::Open so that the
// framing checks run too. Besides "never crash", it checks invariants:
//   - every rejection is kInvalidArgument;
//   - an accepted header's tensors tile the data region exactly, and each one reads back;
//   - SerializeHeader of an accepted header parses again to the same tensors and metadata;
//   - ParseHeader's SAX fast path accepts no header that the strict DOM reader rejects.
// Built with clang by `tools/fuzz safetensors` (corpus seeded from testing/corpus); without
// libFuzzer, //integration/safetensors/fuzz:safetensors_fuzzer runs the files given as arguments.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/check.h"
#include "integration/formats/safetensors/internal/header_sax.h"
#include "integration/formats/safetensors/safetensors.h"
#include "nlohmann/json.hpp"
#include "specs/fuzz/memory_file.h"

namespace shardkit::safetensors {
namespace {

bool SameTensors(const Header& a, const Header& b) {
  if (a.tensors.size() != b.tensors.size() || a.metadata != b.metadata) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorInfo& x = a.tensors[i];
    const TensorInfo& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.begin != y.begin ||
        x.end != y.end) {
      return false;
    }
  }
  return true;
}

// ParseHeader's SAX fast path accepts nothing that the strict DOM reader rejects.
void CheckFastPathAgrees(const uint8_t* data, size_t size) {
  if (size < 8) return;
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | data[i];
  if (length > size - 8) return;
  const std::string_view json(reinterpret_cast<const char*>(data) + 8, length);
  std::optional<internal::RawHeader> fast = internal::ParseWellFormedHeader(json);
  if (!fast.has_value()) return;
  const nlohmann::json dom = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  SHARDKIT_CHECK(dom.is_object()) << "the fast path accepted what is not a JSON object";
  // nlohmann keeps one of two duplicate keys: a size mismatch would be a duplicate let through.
  const size_t metadata = dom.contains("__metadata__") ? 1 : 0;
  SHARDKIT_CHECK(dom.size() == fast->tensors.size() + metadata) << "duplicate keys let through";
}

void FuzzOne(const uint8_t* data, size_t size) {
  CheckFastPathAgrees(data, size);
  absl::StatusOr<Reader> reader = Reader::Open(fuzz::MemoryFilePath(fuzz::MemoryFile(data, size)));
  if (!reader.ok()) {
    SHARDKIT_CHECK(reader.status().code() == absl::StatusCode::kInvalidArgument)
        << reader.status().ToString();
    return;
  }
  const Header& header = reader->header();
  const uint64_t data_size = size - header.data_start;
  uint64_t position = 0;
  for (const TensorInfo& info : header.tensors) {
    SHARDKIT_CHECK(info.begin == position && info.end >= info.begin) << info.name;
    position = info.end;
    absl::StatusOr<Tensor> tensor = reader->ReadTensor(info.name);
    SHARDKIT_CHECK(tensor.ok()) << tensor.status().ToString();
  }
  SHARDKIT_CHECK(position == data_size) << position << " != " << data_size;
  const std::string again = SerializeHeader(header.tensors, header.metadata);
  absl::StatusOr<Header> reparsed = ParseHeader(again, data_size, "reserialized");
  SHARDKIT_CHECK(reparsed.ok()) << reparsed.status().ToString() << " for " << again;
  SHARDKIT_CHECK(SameTensors(header, *reparsed)) << again;
}

}  // namespace
}  // namespace shardkit::safetensors

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardkit::safetensors::FuzzOne(data, size);
  return 0;
}
