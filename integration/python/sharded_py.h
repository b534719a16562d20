// ShardedTensor in Python: _core.shard_parameter, _core.zeros and class ShardedTensor, over
// core/engine's ShardParameter, ShardedTensor::Zeros and ShardedTensor::Gather.
#ifndef SHARDKIT_INTEGRATION_PYTHON_SHARDED_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_SHARDED_PY_H_

#include <memory>

#include "core/comm/communicator.h"
#include "core/engine/sharded_tensor.h"
#include "pybind11/pybind11.h"

namespace shardkit::python {

// _core.ShardedTensor: a ShardedTensor and the communicator it was sharded over (none for zeros()
// and from_local() without one). The tensor's shards share memory with every copy.
struct PyShardedTensor {
  std::shared_ptr<const ShardedTensor> tensor;
  std::shared_ptr<Communicator> comm;
};

// Adds class ShardedTensor, shard_parameter(), zeros() and from_local() to module `m`.
void BindShardedTensor(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_SHARDED_PY_H_
