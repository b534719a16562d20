// shardkit._core: the extension module under the `shardkit` Python package (shardkit/__init__.py
// is the public API; this module is its engine room).
#include "core/comm/backend_loader.h"
#include "core/comm/build_id.h"
#include "integration/python/checkpoint_py.h"
#include "integration/python/comm_py.h"
#include "integration/python/sharded_py.h"
#include "integration/python/sync_py.h"
#include "integration/python/tensor_py.h"
#include "pybind11/pybind11.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "shardkit's C++ engine (use the shardkit package, not this module)";
  m.attr("__version__") = pybind11::str(shardkit::kShardkitVersion);
  m.attr("build_id") = pybind11::str(shardkit::BuildId());
  m.def("add_plugin_directory", &shardkit::AddPluginDirectory, pybind11::arg("dir"),
        "Appends a directory to the plugin search path (the package adds its lib/shardkit).");
  shardkit::python::BindTensor(m);
  shardkit::python::BindCommunicator(m);
  shardkit::python::BindShardedTensor(m);
  shardkit::python::BindSync(m);
  shardkit::python::BindCheckpoint(m);
  shardkit::python::BindShardCheckpoint(m);
}
