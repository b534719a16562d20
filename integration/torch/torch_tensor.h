// Zero-copy conversion between shardkit::Tensor and LibTorch's torch::Tensor, on the CPU or a
// CUDA device.
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
// naming it. Meta tensors map to meta tensors (shape and dtype). requires_grad is carried over
// (LibTorch only allows it on floating-point and complex tensors; elsewhere it is dropped).
//
// CUDA: a tensor on cuda:N maps to one on cuda:N over the same device pointer (shardkit's plain
// `cuda`, the current device, becomes the device that owns the pointer). LibTorch needs its CUDA
// part for that: a program that converts CUDA tensors links libtorch_cuda (Bazel:
// //third_party:torch_cuda), or LibTorch's own libtorch.so, which pulls it in. Without it, or
// without a device, ToTorch of a CUDA tensor is kFailedPrecondition saying so. Other devices
// (MPS, XPU, …) are kInvalidArgument.
//
// The stream rule. DLPack 0.6 carries no stream, so the order is the caller's:
//  - before passing a CUDA tensor to a shardkit call, the work that wrote it must be complete or
//    ordered before the call. LibTorch's default stream (the legacy default stream) is ordered
//    before it already: the NCCL plugin runs on a blocking stream (cudaStreamCreate), which the
//    legacy default stream synchronises with. Work queued on any other stream (a
//    c10::cuda::CUDAStreamGuard, a side stream) must be synchronised first
//    (stream.synchronize() or torch::cuda::synchronize());
//  - shardkit's calls return only once their device work is done (the NCCL plugin waits for its
//    stream, the engine's device copies are synchronous), so the tensors they filled may be used
//    on any stream at once;
//  - memory from shardkit's allocator (the NCCL plugin's, cudaMalloc) is not LibTorch's caching
//    allocator's: record_stream() does nothing for it, and it is freed, after a device
//    synchronisation inside cudaFree, when the last owner (either side) lets it go.
#ifndef SHARDKIT_INTEGRATION_TORCH_TORCH_TENSOR_H_
#define SHARDKIT_INTEGRATION_TORCH_TORCH_TENSOR_H_

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace shardkit::libtorch {

// A torch::Tensor sharing `tensor`'s storage (a meta torch tensor for a meta tensor).
// Errors: kInvalidArgument for a dtype LibTorch lacks, naming it; kFailedPrecondition for a CUDA
// tensor when LibTorch has no CUDA (see above).
[[nodiscard]] absl::StatusOr<torch::Tensor> ToTorch(const Tensor& tensor);

// A shardkit Tensor sharing `tensor`'s storage (a meta Tensor for a meta torch tensor).
// Errors: kInvalidArgument for an undefined tensor, a dtype shardkit lacks or a device other than
// the CPU and CUDA.
[[nodiscard]] absl::StatusOr<Tensor> FromTorch(const torch::Tensor& tensor);

// The dtype mapping. Errors: kInvalidArgument naming the dtype without a counterpart.
[[nodiscard]] absl::StatusOr<torch::Dtype> ToTorchDtype(DType dtype);
[[nodiscard]] absl::StatusOr<DType> FromTorchDtype(torch::Dtype dtype);

// The device mapping: cpu ⇄ kCPU, cuda:N ⇄ {kCUDA, N}, shardkit's `cuda` ⇄ LibTorch's kCUDA
// without an index (the current device). Errors: kInvalidArgument naming another device type.
torch::Device ToTorchDevice(const Device& device);
[[nodiscard]] absl::StatusOr<Device> FromTorchDevice(const torch::Device& device);

// Shape as LibTorch's sizes, and back.
std::vector<int64_t> ToTorchSizes(const Shape& shape);
Shape FromTorchSizes(torch::IntArrayRef sizes);

}  // namespace shardkit::libtorch

#endif  // SHARDKIT_INTEGRATION_TORCH_TORCH_TENSOR_H_
