// shard_parameter for the Python package, without Python: one parameter, given as a tensor on the
// source rank and as a tensor, a meta tensor or nothing (None) on the others.
//
// ShardParameter (core/engine/shard_parameter.h) needs the shape and dtype on every rank; a rank
// given None learns them from the source first. So the call is: every rank's local checks (the
// spec's JSON, the name, src_rank, the strategy) agreed on as one status, the same error on every
// rank (AgreeOnStatus); one all-gather of each rank's "dtype:shape" header; then ShardParameter,
// whose agreement compares everything else. One deadline covers the three steps.
#ifndef SHARDKIT_INTEGRATION_PYTHON_SHARD_CALL_H_
#define SHARDKIT_INTEGRATION_PYTHON_SHARD_CALL_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/sharded_tensor.h"
#include "core/tensor/tensor.h"

namespace shardkit::python {

struct ShardCall {
  std::optional<Tensor> tensor;  // nullopt: None
  std::string spec_json;
  int src_rank = 0;
  std::string name = "tensor";
  std::string strategy = "scatter";
  CallOptions call;
};

// Collective. Errors: kInvalidArgument, the same on every rank, for a local problem on any rank
// ("shard_parameter(NAME): rank 1: dim: expected integer, got \"x\"") or a source rank given None;
// ShardParameter's errors.
[[nodiscard]] absl::StatusOr<ShardedTensor> ShardOne(Communicator& comm, const ShardCall& call);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_SHARD_CALL_H_
