#include "integration/formats/torch_zip/internal/crc32.h"

#include <array>

namespace shardkit::torch_zip::internal {
namespace {

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

}  // namespace

uint32_t Crc32(std::string_view bytes) {
  uint32_t crc = 0xffffffffu;
  for (char byte : bytes) crc = kTable[(crc ^ static_cast<uint8_t>(byte)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

}  // namespace shardkit::torch_zip::internal
