#include "core/tensor/dlpack.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace shardkit {
namespace {

// Owns everything an exported DLManagedTensor points to.
struct ExportContext {
  Tensor tensor;  // keeps the storage alive
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed;
};

void DeleteExport(DLManagedTensor* managed) {
  delete static_cast<ExportContext*>(managed->manager_ctx);
}

DLDataType ToDLDataType(DType dtype) {
  const uint8_t bits = static_cast<uint8_t>(ElementSize(dtype) * 8);
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
      return {kDLFloat, bits, 1};
    case DType::kBFloat16:
      return {kDLBfloat, bits, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {kDLInt, bits, 1};
    case DType::kUInt8:
    case DType::kBool:  // DLPack 0.6 has no bool; see dlpack.h
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return {kDLUInt, bits, 1};
    case DType::kComplex64:
      return {kDLComplex, bits, 1};
    case DType::kFloat8E4M3:  // DLPack 0.6 has no float8 types
    case DType::kFloat8E5M2:
    case DType::kFloat8E8M0:
    case DType::kFloat8E4M3Fnuz:
    case DType::kFloat8E5M2Fnuz:
    case DType::kFloat4E2M1:
    case DType::kFloat6E2M3:
    case DType::kFloat6E3M2:
      break;
  }
  return {kDLOpaqueHandle, 0, 0};
}

absl::StatusOr<DType> FromDLDataType(DLDataType t, bool uint8_as_bool) {
  auto unsupported = [&] {
    return absl::InvalidArgumentError(absl::StrCat("DLPack dtype (code ", t.code, ", bits ", t.bits,
                                                   ", lanes ", t.lanes,
                                                   ") is not supported by shardkit"));
  };
  if (t.lanes != 1) return unsupported();
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 16) return DType::kFloat16;
      if (t.bits == 32) return DType::kFloat32;
      if (t.bits == 64) return DType::kFloat64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::kBFloat16;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::kInt8;
      if (t.bits == 16) return DType::kInt16;
      if (t.bits == 32) return DType::kInt32;
      if (t.bits == 64) return DType::kInt64;
      break;
    case kDLUInt:
      if (t.bits == 8) return uint8_as_bool ? DType::kBool : DType::kUInt8;
      if (t.bits == 16) return DType::kUInt16;
      if (t.bits == 32) return DType::kUInt32;
      if (t.bits == 64) return DType::kUInt64;
      break;
    case kDLComplex:
      if (t.bits == 64) return DType::kComplex64;
      break;
    default:
      break;
  }
  return unsupported();
}

absl::StatusOr<Device> FromDLDevice(DLDevice device) {
  if (device.device_type == kDLCPU) return Device::Cpu();
  if (device.device_type == kDLCUDA && device.device_id >= 0) return Device::Cuda(device.device_id);
  return absl::InvalidArgumentError(absl::StrCat("DLPack device type ", device.device_type, " (id ",
                                                 device.device_id,
                                                 ") is not supported by shardkit"));
}

// Validates shape/strides and returns {shape, strides, extent in elements}.
struct Layout {
  Shape shape;
  Shape strides;
  int64_t extent = 0;
};
absl::StatusOr<Layout> ReadLayout(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > 64) {
    return absl::InvalidArgumentError(absl::StrCat("DLPack ndim ", t.ndim, " is not supported"));
  }
  Layout layout;
  layout.shape.assign(t.shape, t.shape + t.ndim);
  layout.strides =
      t.strides ? Shape(t.strides, t.strides + t.ndim) : ContiguousStrides(layout.shape);
  int64_t last = 0;
  bool empty = false;
  for (int d = 0; d < t.ndim; ++d) {
    if (layout.shape[d] < 0 || layout.strides[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DLPack tensor with shape ", ShapeToString(layout.shape), " and strides ",
          ShapeToString(layout.strides), " is not supported (negative size or stride)"));
    }
    empty = empty || layout.shape[d] == 0;
    if (layout.shape[d] > 0) last += (layout.shape[d] - 1) * layout.strides[d];
  }
  layout.extent = empty ? 0 : last + 1;
  return layout;
}

}  // namespace

absl::StatusOr<DLManagedTensor*> ToDLPack(const Tensor& tensor) {
  if (tensor.is_meta()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot export ", tensor.DebugString(), " to DLPack: it has no storage"));
  }
  if (ToDLDataType(tensor.dtype()).code == kDLOpaqueHandle) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot export ", tensor.DebugString(), " to DLPack: DLPack 0.6 has no ",
                     std::string(DTypeName(tensor.dtype())), " type"));
  }
  auto context = std::make_unique<ExportContext>();
  context->tensor = tensor;
  context->shape = tensor.shape();
  context->strides = tensor.strides();
  DLTensor& dl = context->managed.dl_tensor;
  dl.data = tensor.data();
  const Device& device = tensor.device();
  dl.device = {device.is_cpu() ? kDLCPU : kDLCUDA, device.is_cpu() ? 0 : device.index()};
  dl.ndim = static_cast<int>(tensor.dim());
  dl.dtype = ToDLDataType(tensor.dtype());
  dl.shape = context->shape.data();
  dl.strides = context->strides.data();
  dl.byte_offset = 0;
  context->managed.manager_ctx = context.get();
  context->managed.deleter = DeleteExport;
  return &context.release()->managed;
}

absl::StatusOr<Tensor> FromDLPack(DLManagedTensor* managed, const FromDLPackOptions& options) {
  if (managed == nullptr) return absl::InvalidArgumentError("FromDLPack: null tensor");
  // Whatever happens below, the producer's deleter runs exactly once.
  auto release = [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  };
  const DLTensor& dl = managed->dl_tensor;
  absl::StatusOr<DType> dtype = FromDLDataType(dl.dtype, options.uint8_as_bool);
  absl::StatusOr<Device> device = FromDLDevice(dl.device);
  absl::StatusOr<Layout> layout = ReadLayout(dl);
  for (const absl::Status& s : {dtype.status(), device.status(), layout.status()}) {
    if (!s.ok()) {
      release();
      return s;
    }
  }
  const size_t nbytes = static_cast<size_t>(layout->extent) * ElementSize(*dtype);
  auto storage =
      Storage::Wrap(static_cast<std::byte*>(dl.data) + dl.byte_offset, nbytes, *device, release);
  return Tensor::FromStorage(std::move(storage), layout->shape, layout->strides, 0, *dtype);
}

}  // namespace shardkit
