// The checkpoint commands as Python calls: _core.inspect (`shardkit inspect`), over
// integration/checkpoint's library, returning what the CLI prints as data.
#ifndef SHARDKIT_INTEGRATION_PYTHON_CHECKPOINT_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_CHECKPOINT_PY_H_

#include "pybind11/pybind11.h"

namespace shardkit::python {

// Adds inspect() to module `m`.
void BindCheckpoint(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_CHECKPOINT_PY_H_
