// Tensor: a strided view of typed elements on a device, sharing its Storage with other views.
//
// A tensor is either materialised (it has storage) or **meta** (shape and dtype only, no bytes):
// a non-source rank holds a meta tensor for a parameter it has not received yet.
//
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Arange({6, 4}, DType::kFloat32));
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor cols, t.Narrow(1, 1, 2));   // a view, not contiguous
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor packed, cols.Contiguous());  // a copy
//
// Thread-safety: a Tensor value is not synchronised; distinct Tensors may share storage, and
// concurrent writes to the same bytes are the caller's problem (as in PyTorch).
#ifndef SHARDKIT_CORE_TENSOR_TENSOR_H_
#define SHARDKIT_CORE_TENSOR_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/allocator.h"
#include "core/tensor/device.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace shardkit {

class Tensor {
 public:
  // An empty 0-element meta tensor of shape [0], float32. Exists so that Tensor can live in
  // containers; use the factories below.
  Tensor();

  // Uninitialised contiguous tensor. Errors: see ComputeShapeSize; allocation errors.
  [[nodiscard]] static absl::StatusOr<Tensor> Empty(const Shape& shape, DType dtype,
                                                    const Device& device = Device::Cpu());
  [[nodiscard]] static absl::StatusOr<Tensor> Zeros(const Shape& shape, DType dtype,
                                                    const Device& device = Device::Cpu());
  // A CPU tensor holding a copy of `bytes`. Errors: kInvalidArgument if the byte count differs
  // from the shape's.
  [[nodiscard]] static absl::StatusOr<Tensor> FromBytes(const Shape& shape, DType dtype,
                                                        std::span<const std::byte> bytes);
  // A CPU tensor whose element i (row-major) is `start + i` converted to dtype (integers wrap,
  // bool is i % 2 != 0). For tests and demos.
  [[nodiscard]] static absl::StatusOr<Tensor> Arange(const Shape& shape, DType dtype,
                                                     int64_t start = 0);
  // Shape and dtype only; no storage.
  [[nodiscard]] static absl::StatusOr<Tensor> Meta(const Shape& shape, DType dtype);
  // A view of existing storage. Errors: kInvalidArgument if any element would lie outside it.
  [[nodiscard]] static absl::StatusOr<Tensor> FromStorage(std::shared_ptr<Storage> storage,
                                                          const Shape& shape, const Shape& strides,
                                                          int64_t storage_offset, DType dtype);

  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t storage_offset() const { return storage_offset_; }
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  bool is_meta() const { return storage_ == nullptr; }
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool value) { requires_grad_ = value; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * static_cast<int64_t>(ElementSize(dtype_)); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // True if elements are laid out row-major without gaps (dims of size 1 and empty tensors are
  // always contiguous).
  bool IsContiguous() const;

  // The view of elements [start, start + length) along `dim` (negative dims count from the end).
  // Shares storage; meta stays meta. Errors: kInvalidArgument for a dim out of range;
  // kOutOfRange if start/length fall outside [0, size(dim)].
  [[nodiscard]] absl::StatusOr<Tensor> Narrow(int64_t dim, int64_t start, int64_t length) const;

  // A contiguous copy in fresh storage on the same device (meta: a meta tensor).
  [[nodiscard]] absl::StatusOr<Tensor> Clone() const;
  // The same on `device` (host ⇄ device through the device's allocator, as CopyFrom). Errors: as
  // Empty (e.g. kFailedPrecondition when no allocator is registered for `device`) and CopyFrom.
  [[nodiscard]] absl::StatusOr<Tensor> Clone(const Device& device) const;
  // `*this` if contiguous, else Clone().
  [[nodiscard]] absl::StatusOr<Tensor> Contiguous() const;

  // Copies `src`'s elements into this tensor's (any strides on either side; same device type or
  // CPU↔device). Errors: kInvalidArgument on shape or dtype mismatch; kFailedPrecondition if
  // either is meta.
  [[nodiscard]] absl::Status CopyFrom(const Tensor& src);

  // Address of the first element; nullptr for meta tensors.
  std::byte* data() const;

  // The tensor's bytes. Errors: kFailedPrecondition if meta or not contiguous.
  [[nodiscard]] absl::StatusOr<std::span<std::byte>> Bytes() const;

  // "Tensor(float32[12, 4], cpu)" or "Tensor(float32[12, 4], meta)".
  std::string DebugString() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t storage_offset,
         DType dtype, Device device, int64_t numel);

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t storage_offset_ = 0;
  DType dtype_ = DType::kFloat32;
  Device device_;
  int64_t numel_ = 0;
  bool requires_grad_ = false;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_TENSOR_TENSOR_H_
