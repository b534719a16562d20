#include "core/tensor/tensor.h"

#include <cstring>
#include <limits>

#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  auto packed = t.Contiguous();
  EXPECT_TRUE(packed.ok());
  std::vector<T> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) std::memcpy(out.data(), packed->data(), out.size() * sizeof(T));
  return out;
}

TEST(ShapeTest, SizesAndOverflow) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShapeSize s, ComputeShapeSize({3, 4}, DType::kFloat64));
  EXPECT_EQ(s.numel, 12);
  EXPECT_EQ(s.nbytes, 96);
  EXPECT_EQ(ComputeShapeSize({}, DType::kInt8)->numel, 1);
  EXPECT_EQ(ComputeShapeSize({5, 0}, DType::kInt8)->numel, 0);
  EXPECT_THAT(ComputeShapeSize({2, -1}, DType::kInt8),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[2, -1]: dimension 1")));
  EXPECT_THAT(ComputeShapeSize({1LL << 32, 1LL << 32}, DType::kInt8),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("element count overflows")));
  EXPECT_THAT(ComputeShapeSize({1LL << 31, 1LL << 31}, DType::kFloat32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("byte size overflows")));
  EXPECT_THAT(ContiguousStrides({2, 3, 4}), ElementsAre(12, 4, 1));
}

TEST(TensorTest, FactoriesProduceContiguousTensors) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor z, Tensor::Zeros({2, 3}, DType::kInt32));
  EXPECT_THAT(Values<int32_t>(z), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_TRUE(z.IsContiguous());
  EXPECT_EQ(z.nbytes(), 24);
  EXPECT_EQ(z.device(), Device::Cpu());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Arange({2, 3}, DType::kInt64, 10));
  EXPECT_THAT(Values<int64_t>(a), ElementsAre(10, 11, 12, 13, 14, 15));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor b, Tensor::Arange({4}, DType::kBool));
  EXPECT_THAT(Values<uint8_t>(b), ElementsAre(0, 1, 0, 1));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor h, Tensor::Arange({2}, DType::kBFloat16, 1));
  EXPECT_THAT(Values<uint16_t>(h), ElementsAre(0x3f80, 0x4000));
  EXPECT_THAT(Tensor::Empty({-3}, DType::kFloat32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[-3]")));
}

TEST(TensorTest, FromBytesChecksSize) {
  const std::byte bytes[4] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::FromBytes({2}, DType::kInt16, bytes));
  EXPECT_EQ(std::memcmp(t.data(), bytes, 4), 0);
  EXPECT_THAT(Tensor::FromBytes({3}, DType::kInt16, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs 6 bytes, got 4")));
}

TEST(TensorTest, NarrowIsAViewAndChecksRange) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({4, 3}, DType::kFloat32));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor rows, t.Narrow(0, 1, 2));
  EXPECT_TRUE(rows.IsContiguous());
  EXPECT_EQ(rows.storage(), t.storage());
  EXPECT_THAT(Values<float>(rows), ElementsAre(3, 4, 5, 6, 7, 8));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor cols, t.Narrow(-1, 1, 2));
  EXPECT_FALSE(cols.IsContiguous());
  EXPECT_THAT(cols.shape(), ElementsAre(4, 2));
  EXPECT_THAT(Values<float>(cols), ElementsAre(1, 2, 4, 5, 7, 8, 10, 11));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor empty, t.Narrow(0, 4, 0));
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.IsContiguous());
  EXPECT_THAT(t.Narrow(2, 0, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dim 2 out of range")));
  EXPECT_THAT(t.Narrow(0, 3, 2), StatusIs(absl::StatusCode::kOutOfRange,
                                          HasSubstr("[3, 3 + 2) out of range for dim 0")));
  EXPECT_THAT(t.Narrow(1, -1, 1), StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("[-1")));
  EXPECT_THAT(t.Narrow(1, 0, std::numeric_limits<int64_t>::max()),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("size 3")));
}

TEST(TensorTest, CloneContiguousAndCopyFrom) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({2, 3, 4}, DType::kInt16));
  t.set_requires_grad(true);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor mid, t.Narrow(1, 1, 2));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor inner, mid.Narrow(2, 1, 2));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor packed, inner.Contiguous());
  EXPECT_TRUE(packed.IsContiguous());
  EXPECT_NE(packed.storage(), t.storage());
  EXPECT_TRUE(packed.requires_grad());
  EXPECT_THAT(Values<int16_t>(packed), ElementsAre(5, 6, 9, 10, 17, 18, 21, 22));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor same, t.Contiguous());
  EXPECT_EQ(same.storage(), t.storage());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor clone, t.Clone());
  EXPECT_NE(clone.storage(), t.storage());
  EXPECT_EQ(Values<int16_t>(clone), Values<int16_t>(t));
  // Clone onto a named device: the host here; a device without an allocator is refused.
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor on_host, inner.Clone(Device::Cpu()));
  EXPECT_TRUE(on_host.IsContiguous());
  EXPECT_TRUE(on_host.requires_grad());
  EXPECT_THAT(Values<int16_t>(on_host), ElementsAre(5, 6, 9, 10, 17, 18, 21, 22));
  EXPECT_THAT(t.Clone(Device::Cuda(0)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cuda")));

  // Write into a strided destination.
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor dst, Tensor::Zeros({2, 3, 4}, DType::kInt16));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor dst_view, dst.Narrow(2, 1, 2));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor dst_inner, dst_view.Narrow(1, 1, 2));
  ASSERT_THAT(dst_inner.CopyFrom(inner), IsOk());
  EXPECT_EQ(Values<int16_t>(dst)[5], 5);
  EXPECT_EQ(Values<int16_t>(dst)[4], 0);
  EXPECT_EQ(Values<int16_t>(dst)[22], 22);

  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor wrong, Tensor::Zeros({2, 3, 4}, DType::kInt32));
  EXPECT_THAT(wrong.CopyFrom(t),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not match")));
}

TEST(TensorTest, ScalarTensor) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor s, Tensor::Arange({}, DType::kFloat64, 3));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor c, s.Clone());
  EXPECT_THAT(Values<double>(c), ElementsAre(3.0));
  EXPECT_THAT(s.Narrow(0, 0, 1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0-d")));
}

TEST(TensorTest, MetaTensorsHaveNoBytes) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor m, Tensor::Meta({1000, 1000}, DType::kFloat32));
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_EQ(m.nbytes(), 4000000);
  EXPECT_EQ(m.DebugString(), "Tensor(float32[1000, 1000], meta)");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor row, m.Narrow(0, 10, 1));
  EXPECT_TRUE(row.is_meta());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor clone, m.Clone());
  EXPECT_TRUE(clone.is_meta());
  EXPECT_THAT(m.Bytes(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("meta")));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor real, Tensor::Zeros({1000, 1000}, DType::kFloat32));
  EXPECT_THAT(real.CopyFrom(m), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("meta")));
}

TEST(TensorTest, BytesRequiresContiguity) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({3, 3}, DType::kUInt8));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto bytes, t.Bytes());
  EXPECT_EQ(bytes.size(), 9u);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor col, t.Narrow(1, 0, 1));
  EXPECT_THAT(col.Bytes(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not contiguous")));
}

TEST(TensorTest, FromStorageValidatesBounds) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto storage, Storage::Allocate(Device::Cpu(), 16));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t,
                                Tensor::FromStorage(storage, {2, 2}, {2, 1}, 0, DType::kInt32));
  EXPECT_EQ(t.data(), storage->data());
  EXPECT_THAT(Tensor::FromStorage(storage, {2, 2}, {2, 1}, 1, DType::kInt32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds storage")));
  EXPECT_THAT(Tensor::FromStorage(storage, {2, 2}, {2}, 0, DType::kInt32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("do not fit")));
  EXPECT_THAT(Tensor::FromStorage(storage, {2, 2}, {-2, 1}, 2, DType::kInt32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid strides")));
}

TEST(TensorTest, LargeAllocationsUseHugePageAlignment) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor big, Tensor::Empty({3 << 20}, DType::kUInt8));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (2 << 20), 0u);
}

TEST(TensorTest, WrappedStorageRunsDeleter) {
  bool deleted = false;
  {
    static int32_t buffer[4] = {1, 2, 3, 4};
    auto storage = Storage::Wrap(buffer, sizeof(buffer), Device::Cpu(), [&] { deleted = true; });
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t,
                                  Tensor::FromStorage(storage, {4}, {1}, 0, DType::kInt32));
    EXPECT_THAT(Values<int32_t>(t), ElementsAre(1, 2, 3, 4));
  }
  EXPECT_TRUE(deleted);
}

TEST(AllocatorTest, CudaWithoutPluginIsAClearError) {
  EXPECT_THAT(Tensor::Empty({4}, DType::kFloat32, Device::Cuda(0)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cuda:0")));
}

// Copies of 1 MiB and more write around the cache (host_copy.h): strided either side, and into
// an overlapping view of the same storage (which must keep memmove's meaning).
TEST(TensorTest, LargeCopiesStridedAndOverlapping) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor full, Tensor::Arange({1024, 1024}, DType::kInt32));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor columns, full.Narrow(1, 256, 512));  // 2 MiB, strided
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor packed, columns.Contiguous());
  const std::vector<int32_t> got = Values<int32_t>(packed);
  ASSERT_EQ(got.size(), 1024u * 512u);
  for (int64_t r = 0; r < 1024; r += 37) {
    for (int64_t c = 0; c < 512; c += 29) EXPECT_EQ(got[r * 512 + c], r * 1024 + 256 + c);
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back, Tensor::Zeros({1024, 1024}, DType::kInt32));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back_columns, back.Narrow(1, 256, 512));
  SHARDKIT_ASSERT_OK(back_columns.CopyFrom(packed));
  EXPECT_EQ(Values<int32_t>(back_columns), got);

  // Rows 0..1022 onto rows 1..1023 of the same storage: 4 MiB that overlap, copied backwards.
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor upper, full.Narrow(0, 0, 1023));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor lower, full.Narrow(0, 1, 1023));
  SHARDKIT_ASSERT_OK(lower.CopyFrom(upper));
  const std::vector<int32_t> moved = Values<int32_t>(full);
  for (int64_t i = 0; i < 1023 * 1024; i += 4099) EXPECT_EQ(moved[i + 1024], i);
}

}  // namespace
}  // namespace shardkit
