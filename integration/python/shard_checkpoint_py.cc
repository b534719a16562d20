// _core.shard_checkpoint and _core.reshard_checkpoint: `shardkit shard` and `reshard` as one rank
// of a Python communicator (checkpoint::ShardCheckpoint, checkpoint::ReshardCheckpoint).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/reshard_checkpoint.h"
#include "integration/checkpoint/shard_checkpoint.h"
#include "integration/python/checkpoint_py.h"
#include "integration/python/comm_py.h"
#include "integration/python/status_py.h"
#include "integration/report/run_summary.h"
#include "pybind11/stl.h"
#include "specs/plan.h"

namespace shardkit::python {
namespace py = pybind11;
namespace {

// What both calls take besides the communicator and their input.
struct RunArgs {
  std::string plan_path;  // names the plan (the file, or "plan" for a program's)
  std::string plan_json;  // a program's plan; empty: read plan_path
  std::string out;
  std::string format = "shardkit";
  int64_t memory_bytes = checkpoint::kDefaultMemoryBytes;
  int64_t fp8_block = checkpoint::kDefaultFp8Block;
  bool allow_misaligned_scales = false;
  bool strict = false;
  bool allow_replicated_only = false;
  bool progress = false;
  bool echo = true;
  std::optional<double> timeout;
};

// The write options `args` give. Errors: kInvalidArgument for an unknown format or a memory budget
// that is not positive (this rank's own: RunPy agrees on them with every rank).
absl::StatusOr<checkpoint::ShardWriteOptions> WriteOptions(const RunArgs& args) {
  checkpoint::ShardWriteOptions write;
  absl::StatusOr<checkpoint::OutputFormat> format = checkpoint::ParseOutputFormat(args.format);
  if (!format.ok()) return Annotate(format.status(), "format");
  write.format = *format;
  SHARDKIT_RETURN_IF_ERROR(CheckMemoryBytes(args.memory_bytes));
  write.plan_path = args.plan_path;
  write.plan_json = args.plan_json;
  write.out_dir = args.out;
  write.progress = args.progress;
  write.memory_bytes = args.memory_bytes;
  write.fp8 = {.block = args.fp8_block, .allow_misaligned = args.allow_misaligned_scales};
  write.strict = args.strict;
  write.select.strict = args.strict;
  write.allow_replicated_only = args.allow_replicated_only;
  return write;
}

py::dict RankDict(const checkpoint::ShardRunRank& rank) {
  py::dict out;
  out["file"] = rank.file;
  out["tensors"] = rank.tensors;
  out["bytes_read"] = rank.bytes_read;
  out["files_read"] = rank.files_read;
  out["bytes_written"] = rank.bytes_written;
  out["peak_rss"] = rank.peak_rss;
  out["rss_growth"] = rank.rss_growth;
  return out;
}

py::dict ReportDict(const checkpoint::ShardRunReport& report, const CallLog& log) {
  py::dict out;
  out["written_by"] = std::string(checkpoint::WrittenByName(report.written_by));
  out["src_rank"] = report.src_rank;
  out["world_size"] = report.world_size;
  out["in_dir"] = report.in_dir;
  out["in_world_size"] = report.in_world_size;
  out["parameters"] = report.parameters;
  out["sharded"] = report.sharded;
  out["replicated"] = report.replicated;
  out["moved_bytes"] = report.moved_bytes;
  out["rounds"] = report.rounds;
  out["memory_bytes"] = report.memory_bytes;
  out["plan_seconds"] = report.plan_seconds;
  out["stream_seconds"] = report.stream_seconds;
  out["total_seconds"] = report.total_seconds;
  py::list ranks;
  for (const checkpoint::ShardRunRank& rank : report.ranks) ranks.append(RankDict(rank));
  out["ranks"] = ranks;
  out["summary"] = report::FormatShardSummary(report);
  out["log"] = log.lines();
  return out;
}

// Runs `run` (ShardCheckpoint or ReshardCheckpoint, given `write` completed) without the GIL,
// under one deadline for the whole call as the CLI's run has. `write` holds this rank's argument
// errors, if any: every rank first agrees on them (AgreeOnStatus), so that all raise the same
// error instead of the others waiting for the one that gave up.
template <typename Run>
py::dict RunPy(Communicator& comm, const RunArgs& args,
               absl::StatusOr<checkpoint::ShardWriteOptions> write, const char* context, Run run) {
  const CallOptions given = CallOptionsFor(args.timeout);
  checkpoint::ShardRunReport report;
  CallLog log(args.echo);
  absl::Status status;
  RunInterruptibly(comm, [&] {
    const CallOptions call{.deadline = comm.Deadline(given)};
    status = AgreeOnStatus(comm, write.status(), context, call);
    if (status.ok()) {
      write->call = call;
      write->report = &report;
      status = run(*std::move(write), log.stream());
    }
  });
  ThrowIfError(status);
  return ReportDict(report, log);
}

py::dict ShardPy(const std::shared_ptr<Communicator>& comm, const std::string& checkpoint_path,
                 const RunArgs& args, std::optional<int64_t> src_rank,
                 std::optional<std::string> strategy) {
  checkpoint::ShardCheckpointOptions options{.checkpoint_path = checkpoint_path,
                                             .src_rank = src_rank};
  absl::StatusOr<checkpoint::ShardWriteOptions> write = WriteOptions(args);
  if (write.ok() && strategy.has_value()) {
    absl::StatusOr<specs::Strategy> parsed = specs::ParseStrategy(*strategy);
    if (parsed.ok()) {
      options.strategy = *parsed;
    } else {
      write = Annotate(parsed.status(), "strategy");
    }
  }
  return RunPy(*comm, args, std::move(write), "shard_checkpoint",
               [&](checkpoint::ShardWriteOptions write, std::ostream& log) {
                 options.write = std::move(write);
                 return checkpoint::ShardCheckpoint(options, *comm, log);
               });
}

py::dict ReshardPy(const std::shared_ptr<Communicator>& comm, const std::string& in_dir,
                   const RunArgs& args, std::vector<std::string> include,
                   std::vector<std::string> exclude) {
  absl::StatusOr<checkpoint::ShardWriteOptions> write = WriteOptions(args);
  if (write.ok()) {
    write->select.include = std::move(include);
    write->select.exclude = std::move(exclude);
  }
  return RunPy(*comm, args, std::move(write), "reshard_checkpoint",
               [&](checkpoint::ShardWriteOptions write, std::ostream& log) {
                 return checkpoint::ReshardCheckpoint({.in_dir = in_dir, .write = std::move(write)},
                                                      *comm, log);
               });
}

}  // namespace

void BindShardCheckpoint(py::module_& m) {
  m.attr("DEFAULT_MEMORY_BYTES") = checkpoint::kDefaultMemoryBytes;
  m.attr("DEFAULT_FP8_BLOCK") = checkpoint::kDefaultFp8Block;
  py::class_<RunArgs>(m, "RunArgs", "The arguments shard_checkpoint and reshard_checkpoint share.")
      .def(py::init<>())
      .def_readwrite("plan_path", &RunArgs::plan_path)
      .def_readwrite("plan_json", &RunArgs::plan_json)
      .def_readwrite("out", &RunArgs::out)
      .def_readwrite("format", &RunArgs::format)
      .def_readwrite("memory_bytes", &RunArgs::memory_bytes)
      .def_readwrite("fp8_block", &RunArgs::fp8_block)
      .def_readwrite("allow_misaligned_scales", &RunArgs::allow_misaligned_scales)
      .def_readwrite("strict", &RunArgs::strict)
      .def_readwrite("allow_replicated_only", &RunArgs::allow_replicated_only)
      .def_readwrite("progress", &RunArgs::progress)
      .def_readwrite("echo", &RunArgs::echo)
      .def_readwrite("timeout", &RunArgs::timeout);
  m.def("shard_checkpoint", &ShardPy, py::arg("comm"), py::arg("checkpoint"), py::arg("args"),
        py::arg("src_rank"), py::arg("strategy"));
  m.def("reshard_checkpoint", &ReshardPy, py::arg("comm"), py::arg("in_dir"), py::arg("args"),
        py::arg("include"), py::arg("exclude"));
}

}  // namespace shardkit::python
