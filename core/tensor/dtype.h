// DType: the element types shardkit moves, with their sizes and safetensors names.
//
//   absl::StatusOr<DType> d = ParseDType("bfloat16");      // or "BF16"
//   size_t n = ElementSize(*d);                            // 2
//   std::string_view st = SafetensorsName(*d);             // "BF16"
#ifndef SHARDKIT_CORE_TENSOR_DTYPE_H_
#define SHARDKIT_CORE_TENSOR_DTYPE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace shardkit {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt16,
  kInt32,
  kInt64,
  kBool,
  kUInt16,
  kUInt32,
  kUInt64,
  kComplex64,   // two float32: real, imaginary
  kFloat8E4M3,  // the float8 types are moved as bytes: no arithmetic on them here
  kFloat8E5M2,
  kFloat8E8M0,
  kFloat8E4M3Fnuz,
  kFloat8E5M2Fnuz,
  // Sub-byte: 4 or 6 bits per element, packed. Only ever meta tensors and checkpoint bytes: no
  // Tensor holds their data (Tensor::Empty refuses them), so ElementSize is 0 for them.
  kFloat4E2M1,
  kFloat6E2M3,
  kFloat6E3M2,
};

inline constexpr std::array<DType, 19> kAllDTypes = {
    DType::kFloat32,    DType::kFloat64,        DType::kFloat16,       DType::kBFloat16,
    DType::kInt8,       DType::kUInt8,          DType::kInt16,         DType::kInt32,
    DType::kInt64,      DType::kBool,           DType::kUInt16,        DType::kUInt32,
    DType::kUInt64,     DType::kComplex64,      DType::kFloat8E4M3,    DType::kFloat8E5M2,
    DType::kFloat8E8M0, DType::kFloat8E4M3Fnuz, DType::kFloat8E5M2Fnuz};

// The sub-byte dtypes, which kAllDTypes (the dtypes a Tensor holds) leaves out.
inline constexpr std::array<DType, 3> kSubByteDTypes = {DType::kFloat4E2M1, DType::kFloat6E2M3,
                                                        DType::kFloat6E3M2};

// Bytes per element (bool is one byte); 0 for the sub-byte dtypes.
size_t ElementSize(DType dtype);

// Bits per element: 8 × ElementSize, or 4 / 6 for the sub-byte dtypes.
int64_t ElementBits(DType dtype);
bool IsSubByte(DType dtype);

// "float32", "bfloat16", "int64", "bool", "float8_e4m3fn", ... (PyTorch's names)
std::string_view DTypeName(DType dtype);

// "F32", "BF16", "I64", "BOOL", "F8_E4M3", ...
std::string_view SafetensorsName(DType dtype);

bool IsFloatingPoint(DType dtype);

// Accepts either spelling: "float32" or "F32".
// Errors: kInvalidArgument naming the string if it is neither.
[[nodiscard]] absl::StatusOr<DType> ParseDType(std::string_view name);

// Safetensors dtype names only (all 22). Errors: kInvalidArgument naming the dtype.
[[nodiscard]] absl::StatusOr<DType> DTypeFromSafetensors(std::string_view name);

// IEEE 754 binary16 and bfloat16 bit patterns, round-to-nearest-even (NaN stays NaN).
uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_DTYPE_H_
