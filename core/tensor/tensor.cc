#include "core/tensor/tensor.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/tensor/host_copy.h"

namespace shardkit {
namespace {

// Writes `value` as one element of `dtype` at `out`.
void StoreElement(DType dtype, int64_t value, std::byte* out) {
  auto put = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  switch (dtype) {
    case DType::kFloat32:
      return put(static_cast<float>(value));
    case DType::kFloat64:
      return put(static_cast<double>(value));
    case DType::kFloat16:
      return put(FloatToHalfBits(static_cast<float>(value)));
    case DType::kBFloat16:
      return put(FloatToBFloat16Bits(static_cast<float>(value)));
    case DType::kInt8:
      return put(static_cast<int8_t>(value));
    case DType::kUInt8:
      return put(static_cast<uint8_t>(value));
    case DType::kInt16:
      return put(static_cast<int16_t>(value));
    case DType::kInt32:
      return put(static_cast<int32_t>(value));
    case DType::kInt64:
      return put(value);
    case DType::kBool:
      return put(static_cast<uint8_t>(value % 2 != 0));
    case DType::kUInt16:
      return put(static_cast<uint16_t>(value));
    case DType::kUInt32:
      return put(static_cast<uint32_t>(value));
    case DType::kUInt64:
      return put(static_cast<uint64_t>(value));
    case DType::kComplex64: {
      const float parts[2] = {static_cast<float>(value), 0.0f};
      return put(parts);
    }
    case DType::kFloat8E4M3:  // no float8 arithmetic here: the value's low byte is the pattern
    case DType::kFloat8E5M2:
    case DType::kFloat8E8M0:
    case DType::kFloat8E4M3Fnuz:
    case DType::kFloat8E5M2Fnuz:
      return put(static_cast<uint8_t>(value));
    case DType::kFloat4E2M1:  // never: no Tensor holds sub-byte data
    case DType::kFloat6E2M3:
    case DType::kFloat6E3M2:
      return;
  }
}

// Calls copy(dst_byte_offset, src_byte_offset, run_bytes) for each maximal run of elements that
// is contiguous in both layouts, in row-major order.
template <typename CopyRun>
absl::Status ForEachRun(const Shape& shape, const Shape& dst_strides, const Shape& src_strides,
                        int64_t element_size, CopyRun copy_run) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  // Coalesce trailing dimensions that are row-major in both tensors into one run.
  int64_t run = 1;
  int64_t outer = ndim;
  while (outer > 0) {
    const int64_t d = outer - 1;
    if (shape[d] != 1 && (dst_strides[d] != run || src_strides[d] != run)) break;
    run *= shape[d];
    --outer;
  }
  std::vector<int64_t> index(outer, 0);
  int64_t dst_offset = 0;
  int64_t src_offset = 0;
  while (true) {
    SHARDKIT_RETURN_IF_ERROR(
        copy_run(dst_offset * element_size, src_offset * element_size, run * element_size));
    int64_t d = outer - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        dst_offset += dst_strides[d];
        src_offset += src_strides[d];
        break;
      }
      dst_offset -= dst_strides[d] * (shape[d] - 1);
      src_offset -= src_strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
    if (d < 0) return absl::OkStatus();
  }
}

}  // namespace

Tensor::Tensor() : shape_{0}, strides_{1} {}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t storage_offset,
               DType dtype, Device device, int64_t numel)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      storage_offset_(storage_offset),
      dtype_(dtype),
      device_(device),
      numel_(numel) {}

static absl::Status NoSubByteData(DType dtype) {
  if (!IsSubByte(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("a ", std::string(DTypeName(dtype)),
                   " tensor cannot hold data here: sub-byte dtypes are moved only as checkpoint "
                   "bytes (shardkit shard / gather)"));
}

absl::StatusOr<Tensor> Tensor::Empty(const Shape& shape, DType dtype, const Device& device) {
  SHARDKIT_RETURN_IF_ERROR(NoSubByteData(dtype));
  SHARDKIT_ASSIGN_OR_RETURN(ShapeSize size, ComputeShapeSize(shape, dtype));
  SHARDKIT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage,
                            Storage::Allocate(device, static_cast<size_t>(size.nbytes)));
  return Tensor(std::move(storage), shape, ContiguousStrides(shape), 0, dtype, device, size.numel);
}

absl::StatusOr<Tensor> Tensor::Zeros(const Shape& shape, DType dtype, const Device& device) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Empty(shape, dtype, device));
  SHARDKIT_ASSIGN_OR_RETURN(Allocator * allocator, GetAllocator(device));
  SHARDKIT_RETURN_IF_ERROR(allocator->Zero(device, t.data(), static_cast<size_t>(t.nbytes())));
  return t;
}

absl::StatusOr<Tensor> Tensor::FromBytes(const Shape& shape, DType dtype,
                                         std::span<const std::byte> bytes) {
  SHARDKIT_ASSIGN_OR_RETURN(ShapeSize size, ComputeShapeSize(shape, dtype));
  if (static_cast<uint64_t>(size.nbytes) != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("FromBytes: shape ", ShapeToString(shape),
                                                   " of ", std::string(DTypeName(dtype)), " needs ",
                                                   size.nbytes, " bytes, got ", bytes.size()));
  }
  SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Empty(shape, dtype));
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

absl::StatusOr<Tensor> Tensor::Arange(const Shape& shape, DType dtype, int64_t start) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Empty(shape, dtype));
  const size_t element_size = ElementSize(dtype);
  std::byte* out = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) {
    StoreElement(dtype, start + i, out + i * element_size);
  }
  return t;
}

absl::StatusOr<Tensor> Tensor::Meta(const Shape& shape, DType dtype) {
  SHARDKIT_ASSIGN_OR_RETURN(ShapeSize size, ComputeShapeSize(shape, dtype));
  return Tensor(nullptr, shape, ContiguousStrides(shape), 0, dtype, Device::Cpu(), size.numel);
}

absl::StatusOr<Tensor> Tensor::FromStorage(std::shared_ptr<Storage> storage, const Shape& shape,
                                           const Shape& strides, int64_t storage_offset,
                                           DType dtype) {
  SHARDKIT_RETURN_IF_ERROR(NoSubByteData(dtype));
  SHARDKIT_ASSIGN_OR_RETURN(ShapeSize size, ComputeShapeSize(shape, dtype));
  if (storage == nullptr) return absl::InvalidArgumentError("FromStorage: null storage");
  if (strides.size() != shape.size() || storage_offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("FromStorage: strides ", ShapeToString(strides),
                                                   " do not fit shape ", ShapeToString(shape),
                                                   " (storage offset ", storage_offset, ")"));
  }
  // Last element's index; every stride must be non-negative.
  int64_t last = storage_offset;
  for (size_t d = 0; d < shape.size() && size.numel > 0; ++d) {
    int64_t span = 0;
    if (strides[d] < 0 || __builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(last, span, &last)) {
      return absl::InvalidArgumentError(
          absl::StrCat("FromStorage: invalid strides ", ShapeToString(strides)));
    }
  }
  const int64_t capacity = static_cast<int64_t>(storage->nbytes() / ElementSize(dtype));
  if (size.numel > 0 && last >= capacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromStorage: view ", ShapeToString(shape), " strides ", ShapeToString(strides), " offset ",
        storage_offset, " exceeds storage of ", storage->nbytes(), " bytes"));
  }
  Device device = storage->device();
  return Tensor(std::move(storage), shape, strides, storage_offset, dtype, device, size.numel);
}

bool Tensor::IsContiguous() const {
  if (numel_ == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

absl::StatusOr<Tensor> Tensor::Narrow(int64_t dim, int64_t start, int64_t length) const {
  const int64_t ndim = this->dim();
  if (dim < -ndim || dim >= ndim) {
    return absl::InvalidArgumentError(absl::StrCat("Narrow: dim ", dim, " out of range for a ",
                                                   ndim, "-d tensor ", ShapeToString(shape_)));
  }
  if (dim < 0) dim += ndim;
  if (start < 0 || length < 0 || start > shape_[dim] || length > shape_[dim] - start) {
    return absl::OutOfRangeError(absl::StrCat("Narrow: [", start, ", ", start, " + ", length,
                                              ") out of range for dim ", dim, " of size ",
                                              shape_[dim]));
  }
  Tensor view = *this;
  view.shape_[dim] = length;
  view.numel_ = shape_[dim] == 0 ? 0 : numel_ / shape_[dim] * length;
  if (length > 0) view.storage_offset_ += start * strides_[dim];
  return view;
}

absl::StatusOr<Tensor> Tensor::Clone() const { return Clone(device_); }

absl::StatusOr<Tensor> Tensor::Clone(const Device& device) const {
  if (is_meta()) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor copy, Meta(shape_, dtype_));
    copy.requires_grad_ = requires_grad_;
    return copy;
  }
  SHARDKIT_ASSIGN_OR_RETURN(Tensor copy, Empty(shape_, dtype_, device));
  SHARDKIT_RETURN_IF_ERROR(copy.CopyFrom(*this));
  copy.requires_grad_ = requires_grad_;
  return copy;
}

absl::StatusOr<Tensor> Tensor::Contiguous() const {
  if (IsContiguous()) return *this;
  return Clone();
}

namespace {

// Whether the bytes `a` and `b` span (first to last element, strides >= 0) overlap.
bool Overlaps(const Tensor& a, const Tensor& b) {
  auto span = [](const Tensor& t) {
    int64_t last = 0;
    for (size_t d = 0; d < t.shape().size(); ++d) last += (t.shape()[d] - 1) * t.strides()[d];
    const auto begin = reinterpret_cast<uintptr_t>(t.data());
    return std::pair(begin, begin + static_cast<uintptr_t>((last + 1) * ElementSize(t.dtype())));
  };
  const auto [a_begin, a_end] = span(a);
  const auto [b_begin, b_end] = span(b);
  return HostBytesOverlap(reinterpret_cast<const void*>(a_begin), a_end - a_begin,
                          reinterpret_cast<const void*>(b_begin), b_end - b_begin);
}

}  // namespace

absl::Status Tensor::CopyFrom(const Tensor& src) {
  if (src.shape_ != shape_ || src.dtype_ != dtype_) {
    return absl::InvalidArgumentError(absl::StrCat("CopyFrom: source ", src.DebugString(),
                                                   " does not match destination ", DebugString()));
  }
  if (is_meta() || src.is_meta()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CopyFrom: cannot copy between ", src.DebugString(), " and ", DebugString()));
  }
  if (numel_ == 0) return absl::OkStatus();
  std::byte* dst_base = data();
  const std::byte* src_base = src.data();
  const int64_t element_size = static_cast<int64_t>(ElementSize(dtype_));
  if (device_.is_cpu() && src.device_.is_cpu()) {
    // Large copies between bytes that do not overlap write around the cache (host_copy.h).
    const HostRunCopier copier(static_cast<size_t>(nbytes()), Overlaps(*this, src));
    SHARDKIT_RETURN_IF_ERROR(ForEachRun(shape_, strides_, src.strides_, element_size,
                                        [&](int64_t dst_off, int64_t src_off, int64_t n) {
                                          copier.Copy(dst_base + dst_off, src_base + src_off,
                                                      static_cast<size_t>(n));
                                          return absl::OkStatus();
                                        }));
    copier.Finish();
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(Allocator * allocator, GetCopyAllocator(device_, src.device_));
  return ForEachRun(shape_, strides_, src.strides_, element_size,
                    [&](int64_t dst_off, int64_t src_off, int64_t n) {
                      return allocator->Copy(dst_base + dst_off, device_, src_base + src_off,
                                             src.device_, static_cast<size_t>(n));
                    });
}

std::byte* Tensor::data() const {
  if (storage_ == nullptr) return nullptr;
  return storage_->data() + storage_offset_ * static_cast<int64_t>(ElementSize(dtype_));
}

absl::StatusOr<std::span<std::byte>> Tensor::Bytes() const {
  if (is_meta()) {
    return absl::FailedPreconditionError(
        absl::StrCat(DebugString(), " is a meta tensor and has no bytes"));
  }
  if (!IsContiguous()) {
    return absl::FailedPreconditionError(
        absl::StrCat(DebugString(), " is not contiguous (strides ", ShapeToString(strides_), ")"));
  }
  return std::span<std::byte>(data(), static_cast<size_t>(nbytes()));
}

std::string Tensor::DebugString() const {
  return absl::StrCat("Tensor(", std::string(DTypeName(dtype_)), ShapeToString(shape_), ", ",
                      is_meta() ? std::string("meta") : device_.ToString(), ")");
}

}  // namespace shardkit
