// The Communicator in Python: _core.connect (what shardkit.init calls) and class Communicator.
#ifndef SHARDKIT_INTEGRATION_PYTHON_COMM_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_COMM_PY_H_

#include <optional>

#include "core/comm/communicator.h"
#include "pybind11/pybind11.h"

namespace shardkit::python {

// A call's options from an optional timeout in seconds (None: the communicator's default).
// Raises InvalidArgumentError for a timeout that is not a positive number.
CallOptions CallOptionsFor(std::optional<double> timeout_seconds);

// Adds class Communicator and connect() to module `m`.
void BindCommunicator(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_COMM_PY_H_
