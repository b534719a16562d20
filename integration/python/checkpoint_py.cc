#include "integration/python/checkpoint_py.h"

#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/inspect.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/spec_check.h"
#include "integration/flags/flags.h"
#include "integration/python/status_py.h"
#include "integration/report/run_summary.h"
#include "integration/report/spec_text.h"
#include "pybind11/stl.h"

namespace shardkit::python {
namespace py = pybind11;

CallLog::CallLog(bool echo) : buffer_(echo), out_(&buffer_) {}

std::vector<std::string> CallLog::lines() const {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(buffer_.str(), '\n', absl::SkipEmpty())) {
    out.emplace_back(line);
  }
  return out;
}

std::streamsize CallLog::Tee::xsputn(const char* s, std::streamsize n) {
  if (echo_) std::cerr.write(s, n).flush();
  return std::stringbuf::xsputn(s, n);
}

CallLog::Tee::int_type CallLog::Tee::overflow(int_type c) {
  if (echo_ && !traits_type::eq_int_type(c, traits_type::eof())) {
    std::cerr.put(traits_type::to_char_type(c)).flush();
  }
  return std::stringbuf::overflow(c);
}

absl::Status CheckMemoryBytes(int64_t memory_bytes) {
  if (memory_bytes > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("memory_bytes must be positive, got ", memory_bytes));
}

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

// An Inspection as the dict shardkit._checkpoint turns into an Inspection. GIL held.
py::dict InspectionDict(const checkpoint::Inspection& inspection,
                        const std::vector<std::string>& warnings) {
  py::dict out;
  out["kind"] = KindName(inspection.kind);
  out["columns"] = inspection.columns;
  out["rows"] = inspection.rows;
  out["facts"] = inspection.facts;
  out["metadata"] = inspection.metadata;
  out["files"] = inspection.files;
  out["warnings"] = warnings;
  return out;
}

py::dict InspectPy(const std::string& path) {
  std::vector<std::string> warnings;
  absl::StatusOr<checkpoint::Inspection> inspection;
  {
    py::gil_scoped_release release;
    inspection = checkpoint::InspectPath(path, &warnings);
  }
  return InspectionDict(ValueOrThrow(std::move(inspection)), warnings);
}

// `shardkit spec check`: `json_text` (or the file at `path`), optionally bound to `shape` and
// checked for `world` ranks, or with `checkpoint` the dry run of `shard`.
py::dict SpecCheckPy(const std::string& path, const std::string& json_text,
                     std::optional<Shape> shape, std::optional<int64_t> world,
                     const std::string& checkpoint, bool strict, bool allow_replicated_only,
                     int64_t fp8_block, bool allow_misaligned_scales) {
  checkpoint::SpecCheckOptions options{
      .path = path, .json_text = json_text, .shape = std::move(shape), .world = world};
  options.dry_run.checkpoint_path = checkpoint;
  options.dry_run.strict = strict;
  options.dry_run.allow_replicated_only = allow_replicated_only;
  options.dry_run.fp8 = {.block = fp8_block, .allow_misaligned = allow_misaligned_scales};
  std::vector<std::string> warnings;
  absl::StatusOr<checkpoint::SpecCheck> result;
  {
    py::gil_scoped_release release;
    result = checkpoint::CheckSpecFile(options, &warnings);
  }
  const checkpoint::SpecCheck check = ValueOrThrow(std::move(result));
  py::dict out;
  out["plan"] = check.plan;
  out["canonical"] = check.canonical;
  out["fingerprint"] = check.fingerprint;
  out["text"] = report::FormatSpecCheck(check);
  out["warnings"] = warnings;
  out["shards"] = py::none();
  if (check.shards.has_value()) {
    py::list shards;
    for (const specs::ShardMetadata& shard : *check.shards) {
      shards.append(py::make_tuple(shard.placement.rank(), shard.offsets, shard.sizes));
    }
    out["shards"] = shards;
  }
  out["dry_run"] = check.dry_run ? py::object(InspectionDict(*check.dry_run, {})) : py::none();
  return out;
}

py::dict GatherReportDict(const checkpoint::GatherReport& report, const CallLog& log) {
  py::dict out;
  out["parameters"] = report.parameters;
  out["bytes"] = report.bytes;
  out["rank_files"] = report.rank_files;
  out["input_kind"] = report.input_kind;
  out["out"] = report.out;
  out["files"] = report.files;
  out["index_path"] = report.index_path;
  out["seconds"] = report.seconds;
  out["peak_rss"] = report.peak_rss;
  out["summary"] = report::FormatGatherSummary(report);
  out["log"] = log.lines();
  return out;
}

// `shardkit gather`: `format` is --format, `max_file_bytes` > 0 --max-shard-size.
py::dict GatherPy(const std::string& in_dir, const std::string& out, int64_t max_file_bytes,
                  const std::string& format, checkpoint::TensorSelection select,
                  int64_t memory_bytes, bool progress, bool echo) {
  absl::StatusOr<checkpoint::OutputFormat> output_format = checkpoint::ParseOutputFormat(format);
  if (!output_format.ok()) ThrowIfError(Annotate(output_format.status(), "format"));
  ThrowIfError(CheckMemoryBytes(memory_bytes));
  checkpoint::GatherReport report;
  CallLog log(echo);
  absl::Status status;
  {
    py::gil_scoped_release release;
    const checkpoint::GatherOptions options{.select = std::move(select),
                                            .progress = progress,
                                            .memory_bytes = memory_bytes,
                                            .report = &report};
    const checkpoint::GatherOutput output{.format = *output_format,
                                          .max_file_bytes = max_file_bytes};
    status = checkpoint::GatherTo(in_dir, out, output, log.stream(), options);
  }
  ThrowIfError(status);
  return GatherReportDict(report, log);
}

}  // namespace

void BindCheckpoint(py::module_& m) {
  m.def("inspect", &InspectPy, py::arg("path"));
  m.def(
      "parse_byte_size",
      [](const std::string& text) { return ValueOrThrow(flags::ParseByteSize(text)); },
      py::arg("text"));
  m.def("spec_check", &SpecCheckPy, py::arg("path"), py::arg("json_text"), py::arg("shape"),
        py::arg("world"), py::arg("checkpoint"), py::arg("strict"),
        py::arg("allow_replicated_only"), py::arg("fp8_block"), py::arg("allow_misaligned_scales"));
  m.def(
      "gather_checkpoint",
      [](const std::string& in_dir, const std::string& out, int64_t max_file_bytes,
         const std::string& format, std::vector<std::string> include,
         std::vector<std::string> exclude, std::string strip_prefix, bool strict,
         int64_t memory_bytes, bool progress, bool echo) {
        return GatherPy(in_dir, out, max_file_bytes, format,
                        {.include = std::move(include),
                         .exclude = std::move(exclude),
                         .strip_prefix = std::move(strip_prefix),
                         .strict = strict},
                        memory_bytes, progress, echo);
      },
      py::arg("in_dir"), py::arg("out"), py::arg("max_file_bytes"), py::arg("format"),
      py::arg("include"), py::arg("exclude"), py::arg("strip_prefix"), py::arg("strict"),
      py::arg("memory_bytes"), py::arg("progress"), py::arg("echo"));
}

}  // namespace shardkit::python
