#include "integration/python/status_py.h"

#include <string>

#include "pybind11/pybind11.h"

namespace shardkit::python {

namespace py = pybind11;

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  // shardkit._errors.error_for(code name, message): the exception object, .code set.
  py::object error = py::module_::import("shardkit._errors")
                         .attr("error_for")(absl::StatusCodeToString(status.code()),
                                            std::string(status.message()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

}  // namespace shardkit::python
