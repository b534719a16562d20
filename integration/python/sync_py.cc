#include "integration/python/sync_py.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"
#include "integration/python/comm_py.h"
#include "integration/python/sharded_py.h"
#include "integration/python/status_py.h"
#include "pybind11/stl.h"

namespace shardkit::python {
namespace py = pybind11;
namespace {

// One side's parameters as the Python layer passes them: name -> a ShardedTensor (placement
// rank i is the side's i-th rank) or a plain tensor (replicated on every rank of the side).
using Entry = std::pair<std::string, std::variant<PyShardedTensor, Tensor>>;
using Side = std::optional<std::vector<Entry>>;

struct PySyncPlan {
  std::shared_ptr<SyncPlan> plan;
  std::shared_ptr<Communicator> comm;
};

absl::Status AddTo(Module& module, const Entry& entry) {
  if (const Tensor* tensor = std::get_if<Tensor>(&entry.second)) {
    return module.AddParameter(entry.first, *tensor);
  }
  const ShardedTensor& sharded = *std::get<PyShardedTensor>(entry.second).tensor;
  SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(sharded.global_shape(), sharded.dtype()));
  SHARDKIT_RETURN_IF_ERROR(module.AddParameter(entry.first, std::move(meta)));
  return module.SetSharded(entry.first, sharded);
}

// The side as a Module (empty when the side is None). What fails here is local: the caller agrees
// on it with every rank before going on.
absl::Status Fill(const Side& side, Module& module) {
  if (!side.has_value()) return absl::OkStatus();
  for (const Entry& entry : *side) SHARDKIT_RETURN_IF_ERROR(AddTo(module, entry));
  return absl::OkStatus();
}

// Both sides' modules, agreed: a rank that cannot build its own makes every rank fail alike.
absl::Status Modules(Communicator& comm, const Side& source, const Side& destination,
                     Module& source_module, Module& destination_module, const char* context,
                     const CallOptions& call) {
  absl::Status local = Fill(source, source_module);
  if (local.ok()) local = Fill(destination, destination_module);
  return AgreeOnStatus(comm, local, context, call);
}

PySyncPlan PlanSyncPy(const std::shared_ptr<Communicator>& comm, const Side& source,
                      const Side& destination, std::vector<int> source_ranks,
                      std::vector<int> destination_ranks, int64_t memory_bytes,
                      std::optional<double> timeout) {
  const CallOptions given = CallOptionsFor(timeout);
  absl::StatusOr<SyncPlan> plan;
  RunInterruptibly(*comm, [&] {
    const CallOptions call{.deadline = comm->Deadline(given)};
    Module source_module, destination_module;
    absl::Status agreed =
        Modules(*comm, source, destination, source_module, destination_module, "plan_sync", call);
    if (agreed.ok()) {
      const SyncGroups groups{std::move(source_ranks), std::move(destination_ranks)};
      plan =
          PlanSync(source ? &source_module : nullptr, destination ? &destination_module : nullptr,
                   groups, *comm, SyncOptions{.memory_bytes = memory_bytes, .call = call});
    } else {
      plan = agreed;
    }
  });
  return {std::make_shared<SyncPlan>(ValueOrThrow(std::move(plan))), comm};
}

py::dict ReportDict(const SyncReport& report) {
  py::dict out;
  out["updated"] = report.updated;
  out["bytes_received"] = report.bytes_received;
  out["bytes_copied"] = report.bytes_copied;
  out["pack_seconds"] = report.pack_seconds;
  out["unpack_seconds"] = report.unpack_seconds;
  return out;
}

py::dict SyncPy(PySyncPlan& self, const Side& source, const Side& destination, bool verify,
                std::optional<double> timeout) {
  const CallOptions given = CallOptionsFor(timeout);
  SyncReport report;
  absl::Status status;
  RunInterruptibly(*self.comm, [&] {
    const CallOptions call{.deadline = self.comm->Deadline(given)};
    Module source_module, destination_module;
    status = Modules(*self.comm, source, destination, source_module, destination_module,
                     "SyncPlan.sync", call);
    if (status.ok()) {
      status = Sync(*self.plan, source ? &source_module : nullptr,
                    destination ? &destination_module : nullptr, *self.comm,
                    SyncCallOptions{.verify = verify, .call = call}, &report);
    }
  });
  ThrowIfError(status);
  return ReportDict(report);
}

}  // namespace

void BindSync(py::module_& m) {
  py::class_<PySyncPlan>(m, "SyncPlan")
      .def_property_readonly("fingerprint",
                             [](const PySyncPlan& p) { return p.plan->fingerprint(); })
      .def_property_readonly("names", [](const PySyncPlan& p) { return p.plan->names(); })
      .def_property_readonly("rounds", [](const PySyncPlan& p) { return p.plan->rounds(); })
      .def_property_readonly("pieces", [](const PySyncPlan& p) { return p.plan->pieces(); })
      .def_property_readonly("memory_bytes",
                             [](const PySyncPlan& p) { return p.plan->memory_bytes(); })
      .def("sync", &SyncPy, py::arg("source"), py::arg("destination"), py::arg("verify") = false,
           py::arg("timeout") = py::none());
  m.def("plan_sync", &PlanSyncPy, py::arg("comm"), py::arg("source"), py::arg("destination"),
        py::arg("source_ranks"), py::arg("destination_ranks"),
        py::arg("memory_bytes") = kDefaultMoverMemoryBytes, py::arg("timeout") = py::none());
}

}  // namespace shardkit::python
