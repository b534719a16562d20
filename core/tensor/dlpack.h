// DLPack 0.6 interchange: share a Tensor's memory with PyTorch/JAX/CuPy-based code without a copy.
//
//   SHARDKIT_ASSIGN_OR_RETURN(DLManagedTensor* managed, ToDLPack(tensor));
//   // ... hand `managed` to the consumer, which calls managed->deleter(managed) when done ...
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor t, FromDLPack(producer_managed));  // takes ownership
//
// bool: DLPack 0.6 has no bool type (kDLBool arrived in 0.8). shardkit exports bool tensors as
// {kDLUInt, 8 bits}, which is how PyTorch exported bool before DLPack 0.8, and imports
// {kDLUInt, 8} as uint8 unless FromDLPackOptions::uint8_as_bool is set. complex64 is
// {kDLComplex, 64}. DLPack 0.6 has no float8 types: exporting one is an error naming it.
#ifndef SHARDKIT_CORE_TENSOR_DLPACK_H_
#define SHARDKIT_CORE_TENSOR_DLPACK_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"
#include "dlpack/dlpack.h"

namespace shardkit {

// Exports `tensor` without copying. The result shares the tensor's storage and keeps it alive
// until its deleter is called (exactly once, by the consumer). Strides are in elements.
// Errors: kFailedPrecondition for a meta tensor; kInvalidArgument for a dtype DLPack 0.6 cannot
// describe (the float8 types), naming it.
[[nodiscard]] absl::StatusOr<DLManagedTensor*> ToDLPack(const Tensor& tensor);

struct FromDLPackOptions {
  // Read {kDLUInt, 8} as bool instead of uint8 (DLPack 0.6 cannot say "bool").
  bool uint8_as_bool = false;
};

// Imports `managed` without copying and takes ownership of it: its deleter runs when the last
// Tensor sharing the memory is destroyed, or before returning if the import fails.
// Errors: kInvalidArgument for an unsupported device, dtype (lanes != 1, complex other than 64
// bits, other bit widths), negative strides or shape.
[[nodiscard]] absl::StatusOr<Tensor> FromDLPack(DLManagedTensor* managed,
                                                const FromDLPackOptions& options = {});

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_DLPACK_H_
