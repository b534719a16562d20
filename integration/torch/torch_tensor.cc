#include "integration/torch/torch_tensor.h"

#include <ATen/DLConvertor.h>

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/tensor/dlpack.h"

namespace shardkit::libtorch {
namespace {

struct DtypePair {
  DType shardkit;
  torch::Dtype torch;
};

constexpr DtypePair kDtypes[] = {
    {DType::kFloat32, torch::kFloat32},
    {DType::kFloat64, torch::kFloat64},
    {DType::kFloat16, torch::kFloat16},
    {DType::kBFloat16, torch::kBFloat16},
    {DType::kInt8, torch::kInt8},
    {DType::kUInt8, torch::kUInt8},
    {DType::kInt16, torch::kInt16},
    {DType::kInt32, torch::kInt32},
    {DType::kInt64, torch::kInt64},
    {DType::kBool, torch::kBool},
    {DType::kComplex64, torch::kComplexFloat},
};

absl::Status TorchError(std::string_view what, const std::exception& e) {
  return absl::InternalError(absl::StrCat(std::string(what), ": LibTorch: ", e.what()));
}

// Exports a bool tensor's bytes as uint8 (DLPack 0.6 has no bool); others as they are.
torch::Tensor ForExport(const torch::Tensor& tensor) {
  torch::Tensor plain = tensor.detach();
  return plain.scalar_type() == torch::kBool ? plain.view(torch::kUInt8) : plain;
}

absl::StatusOr<Tensor> ImportDLPack(const torch::Tensor& tensor) {
  DLManagedTensor* managed = at::toDLPack(ForExport(tensor));
  return FromDLPack(managed, {.uint8_as_bool = tensor.scalar_type() == torch::kBool});
}

// LibTorch can hold a CUDA tensor only with its CUDA part loaded and a device present.
absl::Status CheckTorchCuda(const Tensor& tensor) {
  if (!tensor.device().is_cuda()) return absl::OkStatus();
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ToTorch: ", tensor.DebugString(),
        " is a CUDA tensor, but LibTorch has no CUDA device here (no GPU, or LibTorch's CUDA "
        "part is not linked: link libtorch_cuda, Bazel //third_party:torch_cuda)"));
  }
  return absl::OkStatus();
}

// The device that owns a CUDA pointer (for shardkit's plain `cuda`, the current device).
absl::StatusOr<int> OwningDevice(void* data) {
  try {
    return at::globalContext().getDeviceFromPtr(data, c10::DeviceType::CUDA).index();
  } catch (const std::exception& e) {
    return TorchError("ToTorch", e);
  }
}

absl::StatusOr<torch::Tensor> ExportDLPack(const Tensor& tensor, torch::Dtype dtype) {
  int device_index = tensor.device().index();
  if (tensor.device().is_cuda() && device_index < 0) {
    SHARDKIT_ASSIGN_OR_RETURN(device_index, OwningDevice(tensor.data()));
  }
  SHARDKIT_ASSIGN_OR_RETURN(DLManagedTensor * managed, ToDLPack(tensor));
  if (tensor.device().is_cuda()) managed->dl_tensor.device.device_id = device_index;
  torch::Tensor shared;
  try {
    shared = at::fromDLPack(managed);  // owns `managed` from here on, even if it throws
  } catch (const std::exception& e) {
    return TorchError("ToTorch", e);
  }
  return dtype == torch::kBool ? shared.view(torch::kBool) : shared;
}

bool CanRequireGrad(torch::Dtype dtype) {
  return c10::isFloatingType(dtype) || c10::isComplexType(dtype);
}

}  // namespace

absl::StatusOr<torch::Dtype> ToTorchDtype(DType dtype) {
  for (const DtypePair& pair : kDtypes) {
    if (pair.shardkit == dtype) return pair.torch;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype ", std::string(DTypeName(dtype)), " has no LibTorch counterpart"));
}

absl::StatusOr<DType> FromTorchDtype(torch::Dtype dtype) {
  for (const DtypePair& pair : kDtypes) {
    if (pair.torch == dtype) return pair.shardkit;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("LibTorch dtype ", c10::toString(dtype), " has no shardkit counterpart"));
}

torch::Device ToTorchDevice(const Device& device) {
  if (device.is_cpu()) return torch::Device(torch::kCPU);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device.index()));
}

absl::StatusOr<Device> FromTorchDevice(const torch::Device& device) {
  if (device.is_cpu()) return Device::Cpu();
  if (device.is_cuda()) return Device::Cuda(device.has_index() ? device.index() : -1);
  return absl::InvalidArgumentError(
      absl::StrCat("LibTorch device ", device.str(), " has no shardkit counterpart"));
}

std::vector<int64_t> ToTorchSizes(const Shape& shape) { return {shape.begin(), shape.end()}; }

Shape FromTorchSizes(torch::IntArrayRef sizes) { return {sizes.begin(), sizes.end()}; }

absl::StatusOr<torch::Tensor> ToTorch(const Tensor& tensor) {
  SHARDKIT_ASSIGN_OR_RETURN(torch::Dtype dtype, ToTorchDtype(tensor.dtype()));
  torch::Tensor out;
  if (tensor.is_meta()) {
    out = torch::empty(ToTorchSizes(tensor.shape()), torch::dtype(dtype).device(torch::kMeta));
  } else {
    SHARDKIT_RETURN_IF_ERROR(CheckTorchCuda(tensor));
    SHARDKIT_ASSIGN_OR_RETURN(out, ExportDLPack(tensor, dtype));
  }
  if (tensor.requires_grad() && CanRequireGrad(dtype)) out.set_requires_grad(true);
  return out;
}

absl::StatusOr<Tensor> FromTorch(const torch::Tensor& tensor) {
  if (!tensor.defined()) return absl::InvalidArgumentError("FromTorch: undefined tensor");
  SHARDKIT_ASSIGN_OR_RETURN(DType dtype, FromTorchDtype(tensor.scalar_type()));
  Tensor out;
  if (tensor.is_meta()) {
    SHARDKIT_ASSIGN_OR_RETURN(out, Tensor::Meta(FromTorchSizes(tensor.sizes()), dtype));
  } else if (!tensor.device().is_cpu() && !tensor.device().is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat("FromTorch: a tensor on ", tensor.device().str(),
                                                   " (shardkit holds CPU and CUDA tensors)"));
  } else {
    try {
      SHARDKIT_ASSIGN_OR_RETURN(out, ImportDLPack(tensor));
    } catch (const std::exception& e) {
      return TorchError("FromTorch", e);
    }
  }
  out.set_requires_grad(tensor.requires_grad());
  return out;
}

}  // namespace shardkit::libtorch
