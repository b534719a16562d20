// absl::Status to Python exceptions: every error of the extension module is raised as the
// subclass of shardkit.Error for its status code (shardkit/_errors.py), with the C++ message.
#ifndef SHARDKIT_INTEGRATION_PYTHON_STATUS_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_STATUS_PY_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::python {

// Raises (throws pybind11::error_already_set for) shardkit.Error's subclass for `status`'s code
// when it is not OK. Call with the GIL held.
void ThrowIfError(const absl::Status& status);

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_STATUS_PY_H_
