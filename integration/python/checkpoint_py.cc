#include "integration/python/checkpoint_py.h"

#include <string>
#include <vector>

#include "integration/checkpoint/inspect.h"
#include "integration/python/status_py.h"
#include "pybind11/stl.h"

namespace shardkit::python {
namespace py = pybind11;
namespace {

const char* KindName(checkpoint::InspectedKind kind) {
  switch (kind) {
    case checkpoint::InspectedKind::kCheckpoint:
      return "checkpoint";
    case checkpoint::InspectedKind::kShardDirectory:
      return "shard directory";
    case checkpoint::InspectedKind::kDcpCheckpoint:
      return "dcp checkpoint";
  }
  return "unknown";
}

py::dict InspectPy(const std::string& path) {
  std::vector<std::string> warnings;
  absl::StatusOr<checkpoint::Inspection> inspection;
  {
    py::gil_scoped_release release;
    inspection = checkpoint::InspectPath(path, &warnings);
  }
  const checkpoint::Inspection found = ValueOrThrow(std::move(inspection));
  py::dict out;
  out["kind"] = KindName(found.kind);
  out["columns"] = found.columns;
  out["rows"] = found.rows;
  out["facts"] = found.facts;
  out["metadata"] = found.metadata;
  out["files"] = found.files;
  out["warnings"] = warnings;
  return out;
}

}  // namespace

void BindCheckpoint(py::module_& m) { m.def("inspect", &InspectPy, py::arg("path")); }

}  // namespace shardkit::python
