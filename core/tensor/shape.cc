#include "core/tensor/shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardkit {

absl::StatusOr<ShapeSize> ComputeShapeSize(const Shape& shape, DType dtype) {
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid shape ", ShapeToString(shape), ": dimension ", i, " is negative"));
    }
    if (__builtin_mul_overflow(numel, shape[i], &numel)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid shape ", ShapeToString(shape), ": element count overflows"));
    }
  }
  int64_t nbits = 0;
  if (__builtin_mul_overflow(numel, ElementBits(dtype), &nbits)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid shape ", ShapeToString(shape),
                                                   ": byte size overflows for ",
                                                   std::string(DTypeName(dtype))));
  }
  if (nbits % 8 != 0) {  // sub-byte dtypes: packed, a whole number of bytes
    return absl::InvalidArgumentError(
        absl::StrCat("invalid shape ", ShapeToString(shape), " for ", std::string(DTypeName(dtype)),
                     ": ", numel, " elements are ", nbits, " bits, not a whole number of bytes"));
  }
  return ShapeSize{numel, nbits / 8};
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

Shape ContiguousStrides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

}  // namespace shardkit
