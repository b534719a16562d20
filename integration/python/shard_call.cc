#include "integration/python/shard_call.h"

#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "specs/plan.h"
#include "specs/spec_json.h"

namespace shardkit::python {
namespace {

// What every rank can check alone: the spec parses, the name is a parameter name, src_rank is a
// rank, the strategy is one.
absl::Status CheckLocally(const Communicator& comm, const ShardCall& call) {
  SHARDKIT_RETURN_IF_ERROR(ValidateParameterName(call.name));
  SHARDKIT_RETURN_IF_ERROR(specs::ParseSpec(call.spec_json).status());
  SHARDKIT_RETURN_IF_ERROR(specs::ParseStrategy(call.strategy).status());
  if (call.src_rank < 0 || call.src_rank >= comm.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "src_rank ", call.src_rank, " is not a rank of a world of ", comm.world_size()));
  }
  return absl::OkStatus();
}

// "bfloat16:4,8" for a tensor, "" for None.
std::string Header(const std::optional<Tensor>& tensor) {
  if (!tensor.has_value()) return "";
  return absl::StrCat(std::string(DTypeName(tensor->dtype())), ":",
                      absl::StrJoin(tensor->shape(), ","));
}

absl::StatusOr<Tensor> MetaFromHeader(const std::string& header) {
  const std::vector<std::string> parts = absl::StrSplit(header, ':');
  if (parts.size() != 2) return absl::InternalError(absl::StrCat("bad header \"", header, "\""));
  SHARDKIT_ASSIGN_OR_RETURN(DType dtype, ParseDType(parts[0]));
  Shape shape;
  for (const std::string& dim :
       std::vector<std::string>(absl::StrSplit(parts[1], ',', absl::SkipEmpty()))) {
    int64_t size = 0;
    if (!absl::SimpleAtoi(dim, &size)) {
      return absl::InternalError(absl::StrCat("bad header \"", header, "\""));
    }
    shape.push_back(size);
  }
  return Tensor::Meta(shape, dtype);
}

// This rank's tensor: its own, or (given None) a meta tensor of the source's shape and dtype.
absl::StatusOr<Tensor> TensorHere(Communicator& comm, const ShardCall& call,
                                  const std::string& context) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> headers,
                            comm.AllGather(ConstBuffer(Header(call.tensor)), call.call));
  const std::string& source = headers[static_cast<size_t>(call.src_rank)];
  if (source.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": the source rank ", call.src_rank,
                     " was given no tensor (None): it must hold the tensor to shard"));
  }
  if (call.tensor.has_value()) return *call.tensor;
  return MetaFromHeader(source);
}

}  // namespace

absl::StatusOr<ShardedTensor> ShardOne(Communicator& comm, const ShardCall& given) {
  ShardCall call = given;
  call.call = CallOptions{.deadline = comm.Deadline(given.call)};
  const std::string context = absl::StrCat("shard_parameter(", call.name, ")");
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, CheckLocally(comm, call), context, call.call));
  SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor, TensorHere(comm, call, context));
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec spec, specs::ParseSpec(call.spec_json));
  SHARDKIT_ASSIGN_OR_RETURN(specs::Strategy strategy, specs::ParseStrategy(call.strategy));
  Module module;
  SHARDKIT_RETURN_IF_ERROR(module.AddParameter(call.name, std::move(tensor)));
  ShardOptions options{.src_rank = call.src_rank, .strategy = strategy, .call = call.call};
  SHARDKIT_RETURN_IF_ERROR(ShardParameter(module, call.name, spec, comm, options));
  SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* sharded, module.GetSharded(call.name));
  return *sharded;
}

}  // namespace shardkit::python
