// The Communicator in Python: _core.connect (what shardkit.init calls) and class Communicator.
#ifndef SHARDKIT_INTEGRATION_PYTHON_COMM_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_COMM_PY_H_

#include <optional>

#include "absl/functional/function_ref.h"
#include "core/comm/communicator.h"
#include "pybind11/pybind11.h"

namespace shardkit::python {

// A call's options from an optional timeout in seconds (None: the communicator's default).
// Raises InvalidArgumentError for a timeout that is not a positive number.
CallOptions CallOptionsFor(std::optional<double> timeout_seconds);

// Runs `work` (C++ only: it must not touch Python objects) without the GIL, as one collective
// call over `comm`, so that Ctrl-C can interrupt it. Call with the GIL held. On a communicator
// whose backend can wake a blocked call (Communicator::Interruptible: Gloo, UCX), `work` runs on a
// helper thread while this one runs Python's signal handlers every 50 ms; when one raises (Ctrl-C's
// KeyboardInterrupt), `comm` is aborted (Communicator::Abort: the call fails at once on this rank,
// and the ranks waiting on it fail at once too, naming it as interrupted), `work` is waited for,
// and that exception is thrown (pybind11::error_already_set). Elsewhere `work` runs here, and
// Ctrl-C takes effect once it returns.
void RunInterruptibly(Communicator& comm, absl::FunctionRef<void()> work);

// Adds class Communicator and connect() to module `m`.
void BindCommunicator(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_COMM_PY_H_
