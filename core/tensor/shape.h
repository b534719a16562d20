// Shape: the sizes of a tensor's dimensions, and the arithmetic every layer needs on them (element
// and byte counts with overflow checks, row-major strides, printing). Split from tensor.h so that
// code which only reasons about shapes (specs, layouts) does not depend on storage or allocators.
//
//   SHARDKIT_ASSIGN_OR_RETURN(ShapeSize size, ComputeShapeSize({4096, 4096}, DType::kBFloat16));
//   // size.numel == 16777216, size.nbytes == 33554432
#ifndef SHARDKIT_CORE_TENSOR_SHAPE_H_
#define SHARDKIT_CORE_TENSOR_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"

namespace shardkit {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` and its byte size for `dtype`.
// Errors: kInvalidArgument for a negative dimension or if the element count or byte size
// overflows 63 bits (the message names the shape).
struct ShapeSize {
  int64_t numel;
  int64_t nbytes;
};
[[nodiscard]] absl::StatusOr<ShapeSize> ComputeShapeSize(const Shape& shape, DType dtype);

// "[12, 4]".
std::string ShapeToString(const Shape& shape);

// Row-major strides of a contiguous tensor of `shape`.
Shape ContiguousStrides(const Shape& shape);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_SHAPE_H_
