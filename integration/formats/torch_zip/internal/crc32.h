// CRC-32 (ISO-HDLC: zip's and zlib's), table-driven, for the small records torch_zip_writer.h
// writes whole.
#ifndef SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_INTERNAL_CRC32_H_
#define SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_INTERNAL_CRC32_H_

#include <cstdint>
#include <string_view>

namespace shardkit::torch_zip::internal {

// The CRC-32 of `bytes` (Crc32("123456789") == 0xcbf43926).
uint32_t Crc32(std::string_view bytes);

}  // namespace shardkit::torch_zip::internal

#endif  // SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_INTERNAL_CRC32_H_
