#include "integration/torch/torch_tensor.h"

#include <torch/version.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace shardkit::libtorch {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr DType kShared[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,  DType::kBFloat16,
                             DType::kInt8,    DType::kUInt8,   DType::kInt16,    DType::kInt32,
                             DType::kInt64,   DType::kBool,    DType::kComplex64};

// The torch package of the test venv whose python is `python` (VENV/bin/python): its
// version.py's __version__ ("2.15.0+cu132"), or "" when the venv holds no torch.
std::string VenvTorchVersion(const std::filesystem::path& python) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const fs::directory_entry& lib :
       fs::directory_iterator(python.parent_path().parent_path() / "lib", ec)) {
    std::ifstream in(lib.path() / "site-packages" / "torch" / "version.py");
    std::string line;
    while (std::getline(in, line)) {
      const size_t quote = line.find_first_of("'\"");
      if (line.rfind("__version__", 0) == 0 && quote != std::string::npos) {
        return line.substr(quote + 1, line.find_first_of("'\"", quote + 1) - quote - 1);
      }
    }
  }
  return "";
}

// Where the test venv holds a torch (tools/setup --test-venv), the LibTorch these tests link is
// that one (third_party/local_repos.bzl resolves @libtorch again whenever the venv's torch
// changes), not Debian's 1.13 kept from before the venv existed. Set LIBTORCH_HOME to another
// LibTorch and this fails by design: it names both.
TEST(LinkedLibTorch, IsTheTestVenvsTorchWhereItHoldsOne) {
  const char* python = std::getenv("SHARDKIT_TEST_PYTHON");
  if (python == nullptr) GTEST_SKIP() << "no test venv (SHARDKIT_TEST_PYTHON unset)";
  const std::string version = VenvTorchVersion(python);
  if (version.empty()) GTEST_SKIP() << "the test venv holds no torch";
  std::ostringstream linked;
  linked << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << ".";
  EXPECT_EQ(version.rfind(linked.str(), 0), 0u)
      << "integration/torch links LibTorch " << TORCH_VERSION << " but the test venv (" << python
      << ") holds torch " << version;
}

TEST(ToTorch, EveryDtypeSharesMemoryAndKeepsValues) {
  for (DType dtype : kShared) {
    SCOPED_TRACE(DTypeName(dtype));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({3, 4}, dtype, 1));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor tt, ToTorch(t));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Dtype expected, ToTorchDtype(dtype));
    EXPECT_EQ(tt.scalar_type(), expected);
    EXPECT_EQ(tt.sizes(), torch::IntArrayRef({3, 4}));
    EXPECT_EQ(tt.data_ptr(), static_cast<void*>(t.data()));
    // Round trip: the same bytes, the same dtype, still the same memory.
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back, FromTorch(tt));
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(back.data(), t.data());
  }
}

TEST(ToTorch, WritesAreSeenBothWays) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Zeros({2, 3}, DType::kFloat32));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor tt, ToTorch(t));
  tt.index_put_({1, 2}, 7.5f);
  float* raw = reinterpret_cast<float*>(t.data());
  EXPECT_EQ(raw[5], 7.5f);
  raw[0] = -2.0f;
  EXPECT_EQ(tt.index({0, 0}).item<float>(), -2.0f);
}

TEST(FromTorch, WritesAreSeenBothWays) {
  torch::Tensor tt = torch::arange(12, torch::kInt64).reshape({4, 3});
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, FromTorch(tt));
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_EQ(t.shape(), Shape({4, 3}));
  reinterpret_cast<int64_t*>(t.data())[4] = 99;
  EXPECT_EQ(tt.index({1, 1}).item<int64_t>(), 99);
  tt.index_put_({3, 2}, -5);
  EXPECT_EQ(reinterpret_cast<int64_t*>(t.data())[11], -5);
}

TEST(ToTorch, BoolIsRestoredAsBoolOverTheSameBytes) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({5}, DType::kBool));  // 0 1 0 1 0
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor tt, ToTorch(t));
  ASSERT_EQ(tt.scalar_type(), torch::kBool);
  EXPECT_TRUE(tt.index({1}).item<bool>());
  EXPECT_FALSE(tt.index({2}).item<bool>());
  tt.index_put_({2}, true);
  EXPECT_EQ(static_cast<uint8_t>(t.data()[2]), 1);
  torch::Tensor from = torch::tensor({true, false, true});
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back, FromTorch(from));
  EXPECT_EQ(back.dtype(), DType::kBool);
  EXPECT_EQ(back.data(), static_cast<std::byte*>(from.data_ptr()));
}

TEST(ToTorch, TorchSideOutlivesShardkitSide) {
  torch::Tensor tt;
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({1000}, DType::kFloat32));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(tt, ToTorch(t));
  }  // the shardkit tensor is gone; its storage lives on in tt
  EXPECT_EQ(tt.sum().item<float>(), 999.0f * 1000.0f / 2.0f);
  tt.add_(1.0f);
  EXPECT_EQ(tt.index({999}).item<float>(), 1000.0f);
}

TEST(FromTorch, ShardkitSideOutlivesTorchSide) {
  Tensor t;
  {
    torch::Tensor tt = torch::full({64}, 3.0, torch::kFloat64);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(t, FromTorch(tt));
  }
  const double* raw = reinterpret_cast<const double*>(t.data());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(raw[i], 3.0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor copy, t.Clone());  // still usable by the engine
  EXPECT_EQ(reinterpret_cast<const double*>(copy.data())[63], 3.0);
}

TEST(FromTorch, StridedViewsAreSharedWithTheirStrides) {
  torch::Tensor tt = torch::arange(12, torch::kFloat32).reshape({3, 4});
  torch::Tensor cols = tt.narrow(1, 1, 2);  // not contiguous
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, FromTorch(cols));
  EXPECT_FALSE(t.IsContiguous());
  EXPECT_EQ(t.strides(), Shape({4, 1}));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor packed, t.Contiguous());
  const float* p = reinterpret_cast<const float*>(packed.data());
  EXPECT_EQ(std::vector<float>(p, p + 6), std::vector<float>({1, 2, 5, 6, 9, 10}));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor again, ToTorch(t));
  EXPECT_TRUE(torch::equal(again, cols));
  EXPECT_EQ(again.data_ptr(), cols.data_ptr());
}

TEST(ToTorch, AViewWithAnOffsetStartsAtItsFirstElement) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({4, 3}, DType::kInt32));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor rows, t.Narrow(0, 1, 2));  // elements 3..8
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor tt, ToTorch(rows));
  EXPECT_TRUE(torch::equal(tt, torch::arange(3, 9, torch::kInt32).reshape({2, 3})));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor cols, t.Narrow(1, 2, 1));  // strided: 2, 5, 8, 11
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor tc, ToTorch(cols));
  EXPECT_EQ(tc.strides(), torch::IntArrayRef({3, 1}));
  EXPECT_TRUE(torch::equal(tc.flatten(), torch::tensor({2, 5, 8, 11}, torch::kInt32)));
}

TEST(Convert, MetaAndRequiresGrad) {
  torch::Tensor meta = torch::empty({7, 2}, torch::dtype(torch::kFloat16).device(torch::kMeta));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor m, FromTorch(meta));
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.shape(), Shape({7, 2}));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor back, ToTorch(m));
  EXPECT_TRUE(back.is_meta());
  EXPECT_EQ(back.scalar_type(), torch::kFloat16);
  torch::Tensor w = torch::ones({3}, torch::requires_grad());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor sw, FromTorch(w));
  EXPECT_TRUE(sw.requires_grad());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(torch::Tensor tw, ToTorch(sw));
  EXPECT_TRUE(tw.requires_grad());
  EXPECT_TRUE(tw.is_leaf());
}

TEST(Convert, DtypesWithoutCounterpartAreNamed) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor u16, Tensor::Zeros({2}, DType::kUInt16));
  EXPECT_THAT(ToTorch(u16), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uint16")));
  EXPECT_THAT(FromTorch(torch::zeros({2}, torch::kComplexDouble)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ComplexDouble")));
  EXPECT_THAT(FromTorch(torch::Tensor()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("undefined")));
}

// This test does not link LibTorch's CUDA part (//third_party:torch_cuda): a CUDA tensor (here a
// host buffer labelled cuda:0, never dereferenced) is refused with the reason, not a crash.
TEST(ToTorch, CudaTensorWithoutLibTorchCudaIsRefusedWithTheReason) {
  float bytes[4] = {};
  auto storage = Storage::Wrap(bytes, sizeof(bytes), Device::Cuda(0), [] {});
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t,
                                Tensor::FromStorage(storage, {4}, {1}, 0, DType::kFloat32));
  EXPECT_THAT(ToTorch(t), StatusIs(absl::StatusCode::kFailedPrecondition,
                                   AllOf(HasSubstr("cuda:0"), HasSubstr("libtorch_cuda"))));
}

TEST(Convert, DevicesMapBothWays) {
  EXPECT_EQ(ToTorchDevice(Device::Cpu()), torch::Device(torch::kCPU));
  EXPECT_EQ(ToTorchDevice(Device::Cuda(3)), torch::Device(torch::kCUDA, 3));
  EXPECT_EQ(ToTorchDevice(Device::Cuda()), torch::Device(torch::kCUDA));
  for (const Device& d : {Device::Cpu(), Device::Cuda(3), Device::Cuda()}) {
    SCOPED_TRACE(d.ToString());
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Device back, FromTorchDevice(ToTorchDevice(d)));
    EXPECT_EQ(back, d);
  }
  EXPECT_THAT(FromTorchDevice(torch::Device(torch::kMPS)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mps")));
}

}  // namespace
}  // namespace shardkit::libtorch
