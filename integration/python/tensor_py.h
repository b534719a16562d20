// Tensors across the Python boundary, without copies, through DLPack 0.6 (core/tensor/dlpack.h):
// in, a producer's "dltensor" capsule (what torch's or numpy's __dlpack__() returns); out,
// _core.Tensor, which has __dlpack__ and __dlpack_device__, so torch.from_dlpack and
// numpy.from_dlpack take it. Either way the memory stays alive while either side holds it.
//
// DLPack 0.6 cannot say bool or the float8 types: such tensors cross as uint8 of the same shape
// with their real dtype named beside them (Tensor's `dtype` vs `dlpack_dtype`), and the Python
// side views them back (shardkit/_tensors.py).
#ifndef SHARDKIT_INTEGRATION_PYTHON_TENSOR_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_TENSOR_PY_H_

#include <optional>
#include <string>

#include "core/tensor/tensor.h"
#include "pybind11/pybind11.h"

namespace shardkit::python {

// Takes the DLPack capsule `capsule` (renamed "used_dltensor", as the protocol says) and returns
// a Tensor sharing its memory. `dtype` (a name ParseDType reads), when set, is the tensor's real
// dtype, of the capsule's element size (a bool or float8 tensor viewed as uint8).
// Raises shardkit.Error (InvalidArgumentError) for a capsule DLPack 0.6 cannot describe.
Tensor TensorFromCapsule(const pybind11::capsule& capsule, const std::optional<std::string>& dtype);

// The dtype a tensor crosses DLPack as: its own, or uint8 for those DLPack 0.6 cannot say.
DType DLPackDType(DType dtype);

// Adds class Tensor to module `m`.
void BindTensor(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_TENSOR_PY_H_
