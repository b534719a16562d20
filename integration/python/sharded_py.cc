#include "integration/python/sharded_py.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/engine/sharded_tensor.h"
#include "integration/python/comm_py.h"
#include "integration/python/shard_call.h"
#include "integration/python/status_py.h"
#include "pybind11/stl.h"
#include "specs/parameter_layout.h"
#include "specs/spec_json.h"

namespace shardkit::python {
namespace py = pybind11;
namespace {

PyShardedTensor ShardParameterPy(const std::shared_ptr<Communicator>& comm,
                                 std::optional<Tensor> tensor, const std::string& spec_json,
                                 int src_rank, const std::string& name, const std::string& strategy,
                                 std::optional<double> timeout) {
  const ShardCall call{std::move(tensor),      spec_json, src_rank, name, strategy,
                       CallOptionsFor(timeout)};
  absl::StatusOr<ShardedTensor> sharded;
  RunInterruptibly(*comm, [&] { sharded = ShardOne(*comm, call); });
  return {std::make_shared<const ShardedTensor>(ValueOrThrow(std::move(sharded))), comm};
}

PyShardedTensor ZerosPy(const Shape& shape, const std::string& dtype, const std::string& spec_json,
                        int rank, int world_size, const std::string& device) {
  const DType parsed = ValueOrThrow(ParseDType(dtype));
  const specs::ShardingSpec spec = ValueOrThrow(specs::ParseSpec(spec_json));
  const Device on = ValueOrThrow(Device::Parse(device));
  absl::StatusOr<ShardedTensor> zeros;
  {
    py::gil_scoped_release release;
    zeros = ShardedTensor::Zeros(shape, parsed, spec, world_size, rank, on);
  }
  return {std::make_shared<const ShardedTensor>(ValueOrThrow(std::move(zeros))), nullptr};
}

// This rank's side of `spec` bound over `world_size` ranks, its shards the tensors given (this
// rank's shards in spec order), without a copy or communication: what from_dtensor builds.
absl::StatusOr<ShardedTensor> FromLocal(const Shape& shape, DType dtype,
                                        const std::string& spec_json, int rank, int world_size,
                                        const std::vector<Tensor>& locals) {
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec spec, specs::ParseSpec(spec_json));
  SHARDKIT_ASSIGN_OR_RETURN(specs::ParameterLayout layout,
                            specs::LayOutParameter(spec, shape, world_size));
  std::vector<LocalShard> local;
  for (size_t i = 0; i < layout.shards.size(); ++i) {
    if (layout.shards[i].placement.rank() == rank) local.push_back({i, Tensor()});
  }
  if (local.size() != locals.size()) {
    return absl::InvalidArgumentError(absl::StrCat("from_local: rank ", rank, " holds ",
                                                   local.size(), " shards of ", spec_json,
                                                   ", but was given ", locals.size(), " tensors"));
  }
  for (size_t i = 0; i < local.size(); ++i) local[i].tensor = locals[i];
  return ShardedTensor::Create(shape, dtype, false, *layout.spec, layout.shards, std::move(local),
                               rank);
}

PyShardedTensor FromLocalPy(const Shape& shape, const std::string& dtype,
                            const std::string& spec_json, int rank, int world_size,
                            const std::vector<Tensor>& locals,
                            const std::shared_ptr<Communicator>& comm) {
  const DType parsed = ValueOrThrow(ParseDType(dtype));
  ShardedTensor sharded =
      ValueOrThrow(FromLocal(shape, parsed, spec_json, rank, world_size, locals));
  return {std::make_shared<const ShardedTensor>(std::move(sharded)), comm};
}

std::optional<Tensor> GatherPy(const PyShardedTensor& self, int dst,
                               const std::shared_ptr<Communicator>& comm,
                               std::optional<double> timeout) {
  Communicator* over = comm != nullptr ? comm.get() : self.comm.get();
  if (over == nullptr) {
    ThrowIfError(absl::InvalidArgumentError(
        "gather: this ShardedTensor was made without a communicator (zeros()): pass comm="));
  }
  const CallOptions options = CallOptionsFor(timeout);
  Tensor out;
  const bool here = over->rank() == dst;
  absl::Status status;
  RunInterruptibly(
      *over, [&] { status = self.tensor->Gather(dst, here ? &out : nullptr, *over, options); });
  ThrowIfError(status);
  if (!here) return std::nullopt;
  return out;
}

py::list Shards(const PyShardedTensor& self) {
  py::list shards;
  for (const specs::ShardMetadata& shard : self.tensor->shards()) {
    shards.append(py::make_tuple(py::tuple(py::cast(shard.offsets)),
                                 py::tuple(py::cast(shard.sizes)), shard.placement.ToString()));
  }
  return shards;
}

std::vector<Tensor> LocalTensors(const PyShardedTensor& self) {
  std::vector<Tensor> tensors;
  for (const LocalShard& shard : self.tensor->local_shards()) tensors.push_back(shard.tensor);
  return tensors;
}

std::vector<size_t> LocalIndices(const PyShardedTensor& self) {
  std::vector<size_t> indices;
  for (const LocalShard& shard : self.tensor->local_shards()) indices.push_back(shard.index);
  return indices;
}

std::string Repr(const PyShardedTensor& self) {
  return absl::StrCat("shardkit.ShardedTensor(shape=[",
                      absl::StrJoin(self.tensor->global_shape(), ", "),
                      "], dtype=", std::string(DTypeName(self.tensor->dtype())),
                      ", local_shards=", self.tensor->local_shards().size(), ")");
}

}  // namespace

void BindShardedTensor(py::module_& m) {
  py::class_<PyShardedTensor>(m, "ShardedTensor")
      .def_property_readonly(
          "shape",
          [](const PyShardedTensor& s) { return py::tuple(py::cast(s.tensor->global_shape())); })
      .def_property_readonly(
          "dtype",
          [](const PyShardedTensor& s) { return std::string(DTypeName(s.tensor->dtype())); })
      .def_property_readonly(
          "spec_json",
          [](const PyShardedTensor& s) { return specs::CanonicalJson(s.tensor->spec()); })
      .def_property_readonly("shards", &Shards)
      .def_property_readonly("local_indices", &LocalIndices)
      .def_property_readonly("local_nbytes",
                             [](const PyShardedTensor& s) { return s.tensor->local_nbytes(); })
      .def_property_readonly("comm", [](const PyShardedTensor& s) { return s.comm; })
      .def("local_tensors", &LocalTensors)
      .def("gather", &GatherPy, py::arg("dst") = 0, py::arg("comm") = nullptr,
           py::arg("timeout") = py::none())
      .def("__repr__", &Repr);
  m.def("shard_parameter", &ShardParameterPy, py::arg("comm"), py::arg("tensor"),
        py::arg("spec_json"), py::arg("src_rank") = 0, py::arg("name") = "tensor",
        py::arg("strategy") = "scatter", py::arg("timeout") = py::none());
  m.def("from_local", &FromLocalPy, py::arg("shape"), py::arg("dtype"), py::arg("spec_json"),
        py::arg("rank"), py::arg("world_size"), py::arg("tensors"), py::arg("comm") = nullptr);
  m.def("zeros", &ZerosPy, py::arg("shape"), py::arg("dtype"), py::arg("spec_json"),
        py::arg("rank"), py::arg("world_size"), py::arg("device") = "cpu");
}

}  // namespace shardkit::python
