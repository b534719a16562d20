#include "core/tensor/dlpack.h"

#include <cstring>

#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A producer-side tensor: counts its deleter calls.
struct Producer {
  int32_t data[12];
  int64_t shape[2] = {3, 4};
  int64_t strides[2] = {4, 1};
  int deletes = 0;
  DLManagedTensor managed;

  Producer() {
    for (int i = 0; i < 12; ++i) data[i] = i;
    managed.dl_tensor = {data, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, strides, 0};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deletes;
    };
  }
};

TEST(DLPackTest, ExportSharesMemoryAndKeepsItAlive) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({2, 3}, DType::kFloat32));
  std::weak_ptr<Storage> storage = t.storage();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor cols, t.Narrow(1, 1, 2));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DLManagedTensor * managed, ToDLPack(cols));
  t = Tensor();
  cols = Tensor();
  ASSERT_FALSE(storage.expired());  // the export holds it
  const DLTensor& dl = managed->dl_tensor;
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_THAT(std::vector<int64_t>(dl.shape, dl.shape + 2), ElementsAre(2, 2));
  EXPECT_THAT(std::vector<int64_t>(dl.strides, dl.strides + 2), ElementsAre(3, 1));
  EXPECT_EQ(static_cast<float*>(dl.data)[0], 1.0f);
  EXPECT_EQ(static_cast<float*>(dl.data)[3], 4.0f);
  managed->deleter(managed);
  EXPECT_TRUE(storage.expired());
}

TEST(DLPackTest, ImportIsZeroCopyAndDeletesOnceWhenLastViewDies) {
  Producer producer;
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, FromDLPack(&producer.managed));
    EXPECT_EQ(t.dtype(), DType::kInt32);
    EXPECT_THAT(t.shape(), ElementsAre(3, 4));
    EXPECT_EQ(reinterpret_cast<int32_t*>(t.data()), producer.data);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor row, t.Narrow(0, 2, 1));
    t = Tensor();
    EXPECT_EQ(producer.deletes, 0);
    EXPECT_EQ(reinterpret_cast<int32_t*>(row.data())[0], 8);
  }
  EXPECT_EQ(producer.deletes, 1);
}

TEST(DLPackTest, ImportHonoursStridesAndByteOffset) {
  Producer producer;
  producer.shape[0] = 4;  // a transposed 4x3 view of the 3x4 buffer, starting one element in
  producer.shape[1] = 2;
  producer.strides[0] = 1;
  producer.strides[1] = 4;
  producer.managed.dl_tensor.byte_offset = sizeof(int32_t);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, FromDLPack(&producer.managed));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor packed, t.Contiguous());
  std::vector<int32_t> values(8);
  std::memcpy(values.data(), packed.data(), 32);
  EXPECT_THAT(values, ElementsAre(1, 5, 2, 6, 3, 7, 4, 8));
}

bool IsFloat8(DType dtype) {
  return dtype == DType::kFloat8E4M3 || dtype == DType::kFloat8E5M2 ||
         dtype == DType::kFloat8E8M0 || dtype == DType::kFloat8E4M3Fnuz ||
         dtype == DType::kFloat8E5M2Fnuz;
}

TEST(DLPackTest, RoundTripThroughDLPack) {
  for (DType dtype : kAllDTypes) {
    if (IsFloat8(dtype)) continue;  // below
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({5}, dtype, 3));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(DLManagedTensor * managed, ToDLPack(t));
    FromDLPackOptions options;
    options.uint8_as_bool = dtype == DType::kBool;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back, FromDLPack(managed, options));
    EXPECT_EQ(back.dtype(), dtype) << DTypeName(dtype);
    EXPECT_EQ(back.data(), t.data());
  }
}

TEST(DLPackTest, Float8HasNoDLPackTypeAndSaysSo) {
  for (DType dtype : kAllDTypes) {
    if (!IsFloat8(dtype)) continue;
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({5}, dtype, 3));
    EXPECT_THAT(ToDLPack(t), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr(std::string(DTypeName(dtype)))));
  }
}

TEST(DLPackTest, BoolExportsAsUInt8) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({4}, DType::kBool));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(DLManagedTensor * managed, ToDLPack(t));
  EXPECT_EQ(managed->dl_tensor.dtype.code, kDLUInt);
  EXPECT_EQ(managed->dl_tensor.dtype.bits, 8);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back, FromDLPack(managed));
  EXPECT_EQ(back.dtype(), DType::kUInt8);  // without uint8_as_bool
}

TEST(DLPackTest, RejectsUnsupportedInputsAndStillReleases) {
  struct Case {
    DLDataType dtype;
    DLDevice device;
    const char* message;
  };
  const Case cases[] = {
      {{kDLComplex, 128, 1}, {kDLCPU, 0}, "code 5, bits 128"},
      {{kDLFloat, 32, 4}, {kDLCPU, 0}, "lanes 4"},
      {{kDLUInt, 128, 1}, {kDLCPU, 0}, "bits 128"},
      {{kDLInt, 32, 1}, {kDLOpenCL, 0}, "device type 4"},
  };
  for (const Case& c : cases) {
    Producer producer;
    producer.managed.dl_tensor.dtype = c.dtype;
    producer.managed.dl_tensor.device = c.device;
    EXPECT_THAT(FromDLPack(&producer.managed),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
    EXPECT_EQ(producer.deletes, 1) << c.message;
  }
  Producer negative;
  negative.strides[0] = -4;
  EXPECT_THAT(FromDLPack(&negative.managed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative")));
  EXPECT_EQ(negative.deletes, 1);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor meta, Tensor::Meta({2}, DType::kInt8));
  EXPECT_THAT(ToDLPack(meta), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("meta")));
}

}  // namespace
}  // namespace shardkit
