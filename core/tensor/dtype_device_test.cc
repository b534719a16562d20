#include <cmath>
#include <iterator>
#include <utility>

#include "core/tensor/device.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DTypeTest, SizesAndNamesRoundTrip) {
  const std::pair<DType, size_t> sizes[] = {
      {DType::kFloat32, 4}, {DType::kFloat64, 8}, {DType::kFloat16, 2}, {DType::kBFloat16, 2},
      {DType::kInt8, 1},    {DType::kUInt8, 1},   {DType::kInt16, 2},   {DType::kInt32, 4},
      {DType::kInt64, 8},   {DType::kBool, 1}};
  for (auto [dtype, size] : sizes) {
    EXPECT_EQ(ElementSize(dtype), size) << DTypeName(dtype);
    EXPECT_THAT(ParseDType(DTypeName(dtype)), IsOkAndHolds(dtype));
    EXPECT_THAT(ParseDType(SafetensorsName(dtype)), IsOkAndHolds(dtype));
    EXPECT_THAT(DTypeFromSafetensors(SafetensorsName(dtype)), IsOkAndHolds(dtype));
  }
  EXPECT_EQ(SafetensorsName(DType::kBFloat16), "BF16");
  EXPECT_EQ(SafetensorsName(DType::kBool), "BOOL");
  EXPECT_EQ(DTypeName(DType::kUInt8), "uint8");
  EXPECT_TRUE(IsFloatingPoint(DType::kBFloat16));
  EXPECT_FALSE(IsFloatingPoint(DType::kInt64));
}

TEST(DTypeTest, EverySafetensorsByteDTypeIsKnown) {
  const std::pair<const char*, size_t> known[] = {
      {"BOOL", 1},    {"U8", 1},      {"I8", 1},          {"I16", 2},        {"U16", 2},
      {"F16", 2},     {"BF16", 2},    {"I32", 4},         {"U32", 4},        {"F32", 4},
      {"C64", 8},     {"F64", 8},     {"I64", 8},         {"U64", 8},        {"F8_E4M3", 1},
      {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"F8_E4M3FNUZ", 1}, {"F8_E5M2FNUZ", 1}};
  EXPECT_EQ(std::size(known), kAllDTypes.size());
  for (const auto& [name, size] : known) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(DType dtype, DTypeFromSafetensors(name));
    EXPECT_EQ(SafetensorsName(dtype), name);
    EXPECT_EQ(ElementSize(dtype), size) << name;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(DType by_name, ParseDType(DTypeName(dtype)));
    EXPECT_EQ(by_name, dtype) << name;
  }
  const std::pair<const char*, int64_t> sub_byte[] = {{"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}};
  for (const auto& [name, bits] : sub_byte) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(DType dtype, DTypeFromSafetensors(name));
    EXPECT_TRUE(IsSubByte(dtype));
    EXPECT_EQ(ElementBits(dtype), bits) << name;
    EXPECT_EQ(ElementSize(dtype), 0u) << name;
    // Packed: a whole number of bytes or an error; never a Tensor with data.
    EXPECT_THAT(ComputeShapeSize({4, 2}, dtype),
                IsOkAndHolds(::testing::Field(&ShapeSize::nbytes, 8 * bits / 8)));
    EXPECT_THAT(ComputeShapeSize({3}, dtype),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whole number of bytes")));
  }
}

TEST(DTypeTest, RejectsUnknownNames) {
  EXPECT_THAT(ParseDType("float"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown dtype \"float\"")));
  EXPECT_THAT(ParseDType(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"\"")));
  EXPECT_THAT(DTypeFromSafetensors("float32"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"float32\"")));
}

TEST(DTypeTest, HalfAndBFloat16Conversions) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);               // rounds to infinity
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even (0)
  EXPECT_EQ(FloatToHalfBits(2049.0f), 0x6800);                // 2048: tie to even
  EXPECT_EQ(FloatToHalfBits(2051.0f), 0x6802);                // 2052: tie to even
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(NAN))));
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {  // every finite positive half round-trips
    ASSERT_EQ(FloatToHalfBits(HalfBitsToFloat(static_cast<uint16_t>(bits))), bits) << bits;
  }
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(257.0f), 0x4380);  // 256 (tie to even)
  EXPECT_EQ(FloatToBFloat16Bits(259.0f), 0x4382);  // 260 (tie to even)
  EXPECT_EQ(BFloat16BitsToFloat(0xc000), -2.0f);
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(NAN))));
}

TEST(DeviceTest, ParsesAndPrints) {
  for (const char* text : {"cpu", "cuda", "cuda:0", "cuda:7", "cuda:2147483647"}) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Device d, Device::Parse(text));
    EXPECT_EQ(d.ToString(), text);
  }
  EXPECT_THAT(Device::Parse("cuda:3"), IsOkAndHolds(Device::Cuda(3)));
  EXPECT_TRUE(Device::Parse("cpu")->is_cpu());
  EXPECT_EQ(Device::Parse("cuda")->index(), -1);
  EXPECT_NE(Device::Cuda(), Device::Cuda(0));
}

TEST(DeviceTest, RejectsEverythingElse) {
  for (const char* text : {"", "CPU", "cpu:0", "cuda:", "cuda:01", "cuda:-1", "cuda:x", "meta",
                           "cuda:2147483648", " cpu", "cuda:1 ", "gpu"}) {
    EXPECT_THAT(Device::Parse(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("invalid device \"" + std::string(text) + "\"")));
  }
}

}  // namespace
}  // namespace shardkit
