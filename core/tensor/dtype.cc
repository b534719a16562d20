#include "core/tensor/dtype.h"

#include <cstring>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace shardkit {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;  // bytes; 0 for sub-byte dtypes (bits below)
  std::string_view name;
  std::string_view safetensors;
  bool floating;
};

constexpr DTypeInfo kInfo[] = {
    {DType::kFloat32, 4, "float32", "F32", true},
    {DType::kFloat64, 8, "float64", "F64", true},
    {DType::kFloat16, 2, "float16", "F16", true},
    {DType::kBFloat16, 2, "bfloat16", "BF16", true},
    {DType::kInt8, 1, "int8", "I8", false},
    {DType::kUInt8, 1, "uint8", "U8", false},
    {DType::kInt16, 2, "int16", "I16", false},
    {DType::kInt32, 4, "int32", "I32", false},
    {DType::kInt64, 8, "int64", "I64", false},
    {DType::kBool, 1, "bool", "BOOL", false},
    {DType::kUInt16, 2, "uint16", "U16", false},
    {DType::kUInt32, 4, "uint32", "U32", false},
    {DType::kUInt64, 8, "uint64", "U64", false},
    {DType::kComplex64, 8, "complex64", "C64", false},
    {DType::kFloat8E4M3, 1, "float8_e4m3fn", "F8_E4M3", true},
    {DType::kFloat8E5M2, 1, "float8_e5m2", "F8_E5M2", true},
    {DType::kFloat8E8M0, 1, "float8_e8m0fnu", "F8_E8M0", true},
    {DType::kFloat8E4M3Fnuz, 1, "float8_e4m3fnuz", "F8_E4M3FNUZ", true},
    {DType::kFloat8E5M2Fnuz, 1, "float8_e5m2fnuz", "F8_E5M2FNUZ", true},
    {DType::kFloat4E2M1, 0, "float4_e2m1", "F4", true},
    {DType::kFloat6E2M3, 0, "float6_e2m3", "F6_E2M3", true},
    {DType::kFloat6E3M2, 0, "float6_e3m2", "F6_E3M2", true},
};
static_assert(std::size(kInfo) == kAllDTypes.size() + kSubByteDTypes.size());

const DTypeInfo& Info(DType dtype) { return kInfo[static_cast<size_t>(dtype)]; }

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

size_t ElementSize(DType dtype) { return Info(dtype).size; }
bool IsSubByte(DType dtype) { return Info(dtype).size == 0; }
int64_t ElementBits(DType dtype) {
  switch (dtype) {
    case DType::kFloat4E2M1:
      return 4;
    case DType::kFloat6E2M3:
    case DType::kFloat6E3M2:
      return 6;
    default:
      return static_cast<int64_t>(Info(dtype).size) * 8;
  }
}
std::string_view DTypeName(DType dtype) { return Info(dtype).name; }
std::string_view SafetensorsName(DType dtype) { return Info(dtype).safetensors; }
bool IsFloatingPoint(DType dtype) { return Info(dtype).floating; }

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kInfo) {
    if (name == info.name || name == info.safetensors) return info.dtype;
  }
  std::string names, safetensors;
  for (const DTypeInfo& info : kInfo) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", AbslView(info.name));
    absl::StrAppend(&safetensors, safetensors.empty() ? "" : ", ", AbslView(info.safetensors));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype \"", AbslView(name),
                                                 "\"; expected one of ", names, " (or ",
                                                 safetensors, ")"));
}

absl::StatusOr<DType> DTypeFromSafetensors(std::string_view name) {
  for (const DTypeInfo& info : kInfo) {
    if (name == info.safetensors) return info.dtype;
  }
  absl::string_view n = AbslView(name);
  if (n == "F4" || n == "F6_E2M3" || n == "F6_E3M2") {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors dtype ", n, " is not supported by shardkit (sub-byte elements)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown safetensors dtype \"", n, "\""));
}

uint16_t FloatToBFloat16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float BFloat16BitsToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

uint16_t FloatToHalfBits(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof(f));
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x33000000u) return static_cast<uint16_t>(sign);             // underflow -> 0
  int exponent = static_cast<int>(abs >> 23) - 127 + 15;
  uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  int shift = exponent <= 0 ? 14 - exponent : 13;  // subnormal results shift further
  if (exponent <= 0) exponent = 0;
  uint32_t half = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  // `half` still carries the implicit bit for normal numbers; adding the biased exponent
  // (minus one, for that bit) carries correctly into the exponent on mantissa overflow.
  uint32_t result = exponent == 0 ? half : ((static_cast<uint32_t>(exponent - 1) << 10) + half);
  return static_cast<uint16_t>(sign | result);
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t f;
  if (exponent == 0x1f) {
    f = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    f = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    f = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    f = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &f, sizeof(value));
  return value;
}

}  // namespace shardkit
