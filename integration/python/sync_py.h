// Weight sync in Python: _core.plan_sync and class SyncPlan, over core/engine/sync.h.
#ifndef SHARDKIT_INTEGRATION_PYTHON_SYNC_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_SYNC_PY_H_

#include "pybind11/pybind11.h"

namespace shardkit::python {

// Adds class SyncPlan and plan_sync() to module `m`.
void BindSync(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_SYNC_PY_H_
