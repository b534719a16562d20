#include "integration/python/tensor_py.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/dlpack.h"
#include "integration/python/status_py.h"
#include "pybind11/stl.h"

namespace shardkit::python {
namespace py = pybind11;
namespace {

constexpr char kCapsuleName[] = "dltensor";
constexpr char kUsedCapsuleName[] = "used_dltensor";

// A capsule nobody consumed still owns its tensor; a consumed one was renamed.
void DeleteUnusedCapsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

// `tensor` with another dtype of the same element size, sharing its memory.
absl::StatusOr<Tensor> Reinterpret(const Tensor& tensor, DType dtype) {
  if (ElementSize(dtype) != ElementSize(tensor.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", std::string(DTypeName(tensor.dtype())), " tensor cannot be read as ",
                     std::string(DTypeName(dtype)), ": their elements differ in size"));
  }
  if (tensor.is_meta()) return Tensor::Meta(tensor.shape(), dtype);
  return Tensor::FromStorage(tensor.storage(), tensor.shape(), tensor.strides(),
                             tensor.storage_offset(), dtype);
}

py::capsule ToCapsule(const Tensor& tensor) {
  Tensor exported = tensor;
  if (DLPackDType(tensor.dtype()) != tensor.dtype()) {
    exported = ValueOrThrow(Reinterpret(tensor, DLPackDType(tensor.dtype())));
  }
  DLManagedTensor* managed = ValueOrThrow(ToDLPack(exported));
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, &DeleteUnusedCapsule);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

// (DLPack device type, index): kDLCPU = 1, kDLCUDA = 2.
py::tuple DLPackDevice(const Tensor& tensor) {
  if (tensor.device().type() == DeviceType::kCuda) {
    return py::make_tuple(static_cast<int>(kDLCUDA), std::max(tensor.device().index(), 0));
  }
  return py::make_tuple(static_cast<int>(kDLCPU), 0);
}

}  // namespace

DType DLPackDType(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kFloat8E8M0:
    case DType::kFloat8E4M3Fnuz:
    case DType::kFloat8E5M2Fnuz:
      return DType::kUInt8;
    default:
      return dtype;
  }
}

Tensor TensorFromCapsule(const py::capsule& capsule, const std::optional<std::string>& dtype) {
  PyObject* object = capsule.ptr();
  if (!PyCapsule_IsValid(object, kCapsuleName)) {
    ThrowIfError(absl::InvalidArgumentError(
        "expected an unused DLPack capsule named \"dltensor\" (what __dlpack__() returns; a "
        "capsule can be taken once)"));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(object, kCapsuleName));
  if (PyCapsule_SetName(object, kUsedCapsuleName) != 0) throw py::error_already_set();
  Tensor tensor = ValueOrThrow(FromDLPack(managed));
  if (!dtype.has_value()) return tensor;
  const DType real = ValueOrThrow(ParseDType(*dtype));
  return ValueOrThrow(Reinterpret(tensor, real));
}

void BindTensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor",
                     "A tensor of shardkit's, shared with Python without copies through DLPack.")
      .def_static("from_dlpack", &TensorFromCapsule, py::arg("capsule"),
                  py::arg("dtype") = py::none(),
                  "Takes a DLPack capsule (consumed) and shares its memory.")
      .def_static(
          "meta",
          [](const Shape& shape, const std::string& dtype) {
            return ValueOrThrow(Tensor::Meta(shape, ValueOrThrow(ParseDType(dtype))));
          },
          py::arg("shape"), py::arg("dtype"), "A tensor with shape and dtype but no data.")
      .def_property_readonly("shape",
                             [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype",
                             [](const Tensor& t) { return std::string(DTypeName(t.dtype())); })
      .def_property_readonly(
          "dlpack_dtype",
          [](const Tensor& t) { return std::string(DTypeName(DLPackDType(t.dtype()))); })
      .def_property_readonly("device", [](const Tensor& t) { return t.device().ToString(); })
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("is_meta", &Tensor::is_meta)
      .def_property_readonly("data_ptr",
                             [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); })
      .def(
          "__dlpack__",
          [](const Tensor& t, const py::object&, const py::object&, const py::object&,
             const py::object&) { return ToCapsule(t); },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "A DLPack 0.6 capsule (\"dltensor\") sharing this tensor's memory.")
      .def("__dlpack_device__", &DLPackDevice)
      .def("__repr__", [](const Tensor& t) {
        return absl::StrCat("shardkit._core.Tensor(shape=",
                            py::repr(py::tuple(py::cast(t.shape()))).cast<std::string>(),
                            ", dtype=", std::string(DTypeName(t.dtype())),
                            ", device=", t.device().ToString(), ")");
      });
}

}  // namespace shardkit::python
