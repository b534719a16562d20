// Zero-copy conversion between shardkit::Tensor and LibTorch's torch::Tensor (CPU only).
//
//   SHARDKIT_ASSIGN_OR_RETURN(torch::Tensor t, ToTorch(shard));  // t shares shard's memory
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor back, FromTorch(t));         // back shares t's memory
//
// Both directions share storage through DLPack 0.6 (at::toDLPack / at::fromDLPack and
// core/tensor/dlpack.h): a write through either side is seen by the other, and the memory lives
// as long as either side holds it (either may be destroyed first). Strided views keep their
// strides (both libraries describe them the same way); nothing is copied, ever.
//
// Dtypes: float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool and
// complex64 — every dtype both libraries have. bool crosses DLPack 0.6 as {kDLUInt, 8} (see
// core/tensor/dlpack.h) and is restored as bool on the other side by a zero-copy dtype view.
// shardkit's uint16/32/64 and float8/sub-byte types have no LibTorch 1.13 counterpart, LibTorch's
// complex128, quantized and similar types none in shardkit: converting one is kInvalidArgument
// naming it. Meta tensors map to meta tensors (shape and dtype). CUDA tensors are out of scope
// (kInvalidArgument). requires_grad is carried over (LibTorch only allows it on floating-point and
// complex tensors; elsewhere it is dropped).
#ifndef SHARDKIT_INTEGRATION_TORCH_TORCH_TENSOR_H_
#define SHARDKIT_INTEGRATION_TORCH_TORCH_TENSOR_H_

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace shardkit::libtorch {

// A torch::Tensor sharing `tensor`'s storage (a meta torch tensor for a meta tensor).
// Errors: kInvalidArgument for a dtype LibTorch lacks or a non-CPU tensor, naming it.
[[nodiscard]] absl::StatusOr<torch::Tensor> ToTorch(const Tensor& tensor);

// A shardkit Tensor sharing `tensor`'s storage (a meta Tensor for a meta torch tensor).
// Errors: kInvalidArgument for an undefined tensor, a dtype shardkit lacks or a non-CPU device.
[[nodiscard]] absl::StatusOr<Tensor> FromTorch(const torch::Tensor& tensor);

// The dtype mapping. Errors: kInvalidArgument naming the dtype without a counterpart.
[[nodiscard]] absl::StatusOr<torch::Dtype> ToTorchDtype(DType dtype);
[[nodiscard]] absl::StatusOr<DType> FromTorchDtype(torch::Dtype dtype);

// Shape as LibTorch's sizes, and back.
std::vector<int64_t> ToTorchSizes(const Shape& shape);
Shape FromTorchSizes(torch::IntArrayRef sizes);

}  // namespace shardkit::libtorch

#endif  // SHARDKIT_INTEGRATION_TORCH_TORCH_TENSOR_H_
