#include "integration/python/comm_py.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "integration/python/status_py.h"
#include "pybind11/stl.h"

namespace shardkit::python {
namespace py = pybind11;
namespace {

// What init() was given; unset fields come from the launcher's environment (connect.h).
struct ConnectArgs {
  std::optional<std::string> backend;
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<std::string> store;
  std::optional<double> timeout;
  std::optional<std::string> hostname;
  std::optional<std::string> ifname;
};

void Apply(const ConnectArgs& args, ConnectOptions& o) {
  if (args.backend) o.backend = *args.backend;
  if (args.store) o.store_url = *args.store;
  if (args.timeout) o.timeout = absl::Seconds(*args.timeout);
  if (args.hostname) o.hostname = *args.hostname;
  if (args.ifname) o.ifname = *args.ifname;
  if (args.local_rank) o.local_rank = *args.local_rank;
}

// An optional timeout in seconds: absent, or a positive number.
absl::Status CheckTimeout(std::optional<double> seconds) {
  if (!seconds || *seconds > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("timeout=", *seconds, " is not a positive number of seconds"));
}

// rank and world_size given: this process alone says who it is; else the launcher's variables.
absl::StatusOr<ConnectOptions> OptionsFor(const ConnectArgs& args) {
  SHARDKIT_RETURN_IF_ERROR(CheckTimeout(args.timeout));
  if (args.rank.has_value() != args.world_size.has_value()) {
    return absl::InvalidArgumentError(
        "give rank and world_size together, or neither (then the launcher's environment says "
        "them: shardkit launch, torchrun, mpirun or srun)");
  }
  if (!args.rank) return ConnectOptionsFromEnv([&](ConnectOptions& o) { Apply(args, o); });
  ConnectOptions o;
  o.rank = *args.rank;
  o.world_size = *args.world_size;
  o.local_rank = *args.rank;
  Apply(args, o);
  return o;
}

std::shared_ptr<Communicator> ConnectPy(const ConnectArgs& args) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm;
  {
    py::gil_scoped_release release;
    absl::StatusOr<ConnectOptions> options = OptionsFor(args);
    comm = options.ok() ? Connect(*std::move(options)) : options.status();
  }
  return std::shared_ptr<Communicator>(ValueOrThrow(std::move(comm)));
}

void BarrierPy(Communicator& comm, std::optional<double> timeout) {
  const CallOptions options = CallOptionsFor(timeout);
  absl::Status status;
  RunInterruptibly(comm, [&] { status = comm.Barrier(options); });
  ThrowIfError(status);
}

// How often a waiting call runs Python's signal handlers.
constexpr std::chrono::milliseconds kSignalPoll(50);

}  // namespace

void RunInterruptibly(Communicator& comm, absl::FunctionRef<void()> work) {
  if (!comm.Interruptible()) {
    py::gil_scoped_release release;
    work();
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread worker([&] {
    work();
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  bool interrupted = false;
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu);
      if (cv.wait_for(lock, kSignalPoll, [&] { return done; })) break;
    }
    if (PyErr_CheckSignals() != 0) {  // a handler raised: its exception is set
      interrupted = true;
      break;
    }
  }
  {
    py::gil_scoped_release release;
    if (interrupted) comm.Abort();  // the call in flight fails at once
    worker.join();
    // Had the call ended anyway, the communicator still fails now, and its peers learn why.
    if (interrupted) comm.Abort();
  }
  if (interrupted) throw py::error_already_set();
}

CallOptions CallOptionsFor(std::optional<double> timeout_seconds) {
  ThrowIfError(CheckTimeout(timeout_seconds));
  CallOptions options;
  if (timeout_seconds) options.timeout = absl::Seconds(*timeout_seconds);
  return options;
}

void BindCommunicator(py::module_& m) {
  py::class_<Communicator, std::shared_ptr<Communicator>>(
      m, "Communicator", "One rank's connection to the others (core/comm/communicator.h).")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("world_size", &Communicator::world_size)
      .def_property_readonly("backend", &Communicator::backend)
      .def_property_readonly(
          "timeout",
          [](const Communicator& c) { return absl::ToDoubleSeconds(c.default_timeout()); })
      .def("barrier", &BarrierPy, py::arg("timeout") = py::none(),
           "Collective: returns when every rank has called it.")
      .def("__repr__", [](const Communicator& c) {
        return absl::StrCat("shardkit.Communicator(backend=", c.backend(), ", rank=", c.rank(),
                            ", world_size=", c.world_size(), ")");
      });
  m.def(
      "connect",
      [](std::optional<std::string> backend, std::optional<int> rank, std::optional<int> world_size,
         std::optional<int> local_rank, std::optional<std::string> store,
         std::optional<double> timeout, std::optional<std::string> hostname,
         std::optional<std::string> ifname) {
        return ConnectPy({std::move(backend), rank, world_size, local_rank, std::move(store),
                          timeout, std::move(hostname), std::move(ifname)});
      },
      py::kw_only(), py::arg("backend") = py::none(), py::arg("rank") = py::none(),
      py::arg("world_size") = py::none(), py::arg("local_rank") = py::none(),
      py::arg("store") = py::none(), py::arg("timeout") = py::none(),
      py::arg("hostname") = py::none(), py::arg("ifname") = py::none());
}

}  // namespace shardkit::python
