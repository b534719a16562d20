#include "integration/checkpoint/gather_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/background_stage.h"
#include "core/base/slot_pipe.h"
#include "core/base/status_macros.h"
#include "core/os/dir_lock.h"
#include "core/os/files.h"
#include "core/os/interrupt.h"
#include "core/os/proc_status.h"
#include "core/tensor/byte_runs.h"
#include "integration/checkpoint/progress.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/saved_directory.h"
#include "integration/checkpoint/source/shard_dir_source.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"
#include "integration/formats/hf/hf_output.h"
#include "integration/formats/hf/hf_writer.h"
#include "integration/formats/output_file/output_file.h"
#include "integration/formats/safetensors/output_files.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using safetensors::TensorInfo;

// The output's tensors, whole, in the source's order (name order): each one's bytes [0, its
// size) until placed, its source_index its index in the source's header.
absl::StatusOr<std::vector<StreamTensor>> WholeTensors(const TensorSource& source) {
  std::vector<StreamTensor> tensors;
  const std::vector<TensorInfo>& in = source.header().tensors;
  for (size_t i = 0; i < in.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize size, ComputeShapeSize(in[i].shape, in[i].dtype));
    SHARDKIT_ASSIGN_OR_RETURN(
        tensors.emplace_back(),
        MakeStreamTensor(in[i].name, in[i].dtype, in[i].shape, 0,
                         static_cast<uint64_t>(size.nbytes), /*replicated=*/true, {}));
    tensors.back().source_index = i;
  }
  return tensors;
}

// `tensors` (WholeTensors) placed where the writer put them (`file.dest[t][0]`: tensor t's first
// byte in the output's data), in the order of their bytes in the output.
std::vector<StreamTensor> InOutputOrder(std::vector<StreamTensor> tensors,
                                        const formats::RankFile& file) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto at = static_cast<uint64_t>(file.data_start + file.dest[t][0]);
    tensors[t].end += at - tensors[t].begin;
    tensors[t].begin = at;
  }
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const StreamTensor& a, const StreamTensor& b) { return a.begin < b.begin; });
  return tensors;
}

int64_t TotalBytes(const std::vector<StreamTensor>& tensors) {
  int64_t total = 0;
  for (const StreamTensor& t : tensors) total += static_cast<int64_t>(t.end - t.begin);
  return total;
}

// Fills `window` with output bytes [begin, end) (`tensors` in output order): every tensor's part
// of it, read through `source` (replicated tensors: the source rank's copy).
absl::Status FillOutput(const TensorSource& source, const std::vector<StreamTensor>& tensors,
                        uint64_t begin, uint64_t end, std::byte* window) {
  auto first = std::partition_point(tensors.begin(), tensors.end(),
                                    [&](const StreamTensor& t) { return t.end <= begin; });
  for (auto t = first; t != tensors.end() && t->begin < end; ++t) {
    const auto from = static_cast<int64_t>(std::max(begin, t->begin) - t->begin);
    const auto to = static_cast<int64_t>(std::min(end, t->end) - t->begin);
    // Window position of the tensor's byte x: shift + x (the tensor may start before the window).
    const int64_t shift = static_cast<int64_t>(t->begin) - static_cast<int64_t>(begin);
    SHARDKIT_RETURN_IF_ERROR(
        source.ReadBytes(t->source_index, from, to - from, window + (shift + from)));
  }
  return absl::OkStatus();
}

// What gather reads: a shard directory (its index validated, every rank file open and checked,
// each shard found) or a DCP checkpoint (its metadata and every chunk's record checked), as a
// source of whole tensors whose staging buffer is within the budget.
struct GatherInput {
  std::unique_ptr<TensorSource> source;
  int64_t files = 0;       // the rank files or `.distcp` files it reads
  std::string files_kind;  // "rank files", ".distcp files"
};

absl::StatusOr<GatherInput> OpenInput(const std::string& in_dir, const GatherOptions& options,
                                      std::ostream& log) {
  SHARDKIT_RETURN_IF_ERROR(ValidateSelection(options.select));
  GatherInput input;
  const int64_t staging = SplitBudget(options.memory_bytes).staging;
  SavedDirectory saved;
  if (IsDcpSaved(in_dir)) {
    SHARDKIT_ASSIGN_OR_RETURN(saved, OpenSavedDirectory(in_dir, staging));
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(ShardIndex index, ReadSavedIndex(in_dir));
    saved.files = index.world_size;
    saved.files_kind = "rank files";
    SHARDKIT_ASSIGN_OR_RETURN(saved.source,
                              ShardDirSource::OpenWithIndex(in_dir, std::move(index), staging));
  }
  input.files = saved.files;
  input.files_kind = saved.files_kind;
  std::vector<std::string> warnings;
  SHARDKIT_ASSIGN_OR_RETURN(input.source,
                            SelectSaved(saved, options.select, /*items_carried=*/false, &warnings));
  for (const std::string& warning : warnings) log << warning << "\n";
  return input;
}

// The window of a gather of `total` bytes: one process reads and writes it (RoundWindow).
int64_t GatherWindow(int64_t memory_bytes, int64_t total) {
  return RoundWindow(SplitBudget(memory_bytes), kGatherRoundBytes, total);
}

// The output's data, window by window (`tensors` in output order, `total` bytes): this thread
// fills one window while a writer thread hands the other to `out`, which puts it at its offsets
// in its files, in order.
absl::Status WriteWindows(const GatherInput& input, const std::vector<StreamTensor>& tensors,
                          int64_t total, formats::RankSink& out, int64_t memory_bytes,
                          Progress& meter) {
  const int64_t window = GatherWindow(memory_bytes, total);
  const int64_t rounds = (total + window - 1) / window;
  const auto slots = static_cast<size_t>(std::min<int64_t>(2, rounds));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> windows,
                            AllocateBuffers(slots, window));
  SlotPipe pipe(std::max<size_t>(slots, 1));
  // Its first error closes the pipe, which wakes the filling thread: it stops.
  BackgroundStage writer(pipe, BackgroundStage::kConsumer, rounds, [&](int64_t k, size_t slot) {
    const int64_t begin = k * window, size = std::min(window, total - begin);
    return out.WriteAt(static_cast<uint64_t>(begin), windows[slot]->data(),
                       static_cast<size_t>(size));
  });
  absl::Status status;
  for (int64_t k = 0; k < rounds && status.ok(); ++k) {
    std::optional<size_t> slot = pipe.AcquireFree();
    if (!slot) break;  // the writer failed
    const auto begin = static_cast<uint64_t>(k * window);
    const auto end = static_cast<uint64_t>(std::min(total, (k + 1) * window));
    status = FillOutput(*input.source, tensors, begin, end, windows[*slot]->data());
    if (!status.ok()) break;  // nothing half-filled is written
    pipe.Publish(*slot, absl::OkStatus());
    meter.Step(k + 1, static_cast<int64_t>(end));
  }
  if (!status.ok()) pipe.Close();
  writer.Join();
  return status.ok() ? writer.status() : status;
}

// The progress meter of a gather writing `total` bytes; its clock starts now.
Progress MakeMeter(std::ostream& log, const GatherOptions& options, int64_t total) {
  const int64_t window = GatherWindow(options.memory_bytes, total);
  return Progress(log, options.progress, "shardkit gather: writing", (total + window - 1) / window,
                  total, "windows");
}

// Streams the whole output, `total` bytes, into `file` (`tensors`: WholeTensors, placed by the
// writer that created it) under the budget, and commits every file.
absl::Status Gather(const GatherInput& input, const std::vector<StreamTensor>& tensors,
                    int64_t total, formats::RankFile& file, const GatherOptions& options,
                    Progress& meter) {
  const std::vector<StreamTensor> ordered = InOutputOrder(tensors, file);
  SHARDKIT_RETURN_IF_ERROR(
      WriteWindows(input, ordered, total, *file.sink, options.memory_bytes, meter));
  return file.sink->Commit();
}

// The caller's report, when asked for (GatherOptions::report): the output's `files` (paths),
// with `index_path` for a Hugging Face output's index.
void Report(const GatherOptions& options, const GatherInput& input, int64_t total,
            const Progress& meter, GatherReport report) {
  if (options.report == nullptr) return;
  absl::StatusOr<int64_t> peak = os::ProcStatusBytes("VmHWM");
  report.parameters = static_cast<int64_t>(input.source->header().tensors.size());
  report.bytes = total;
  report.rank_files = input.files;
  report.input_kind = input.files_kind;
  report.seconds = meter.Elapsed();
  report.peak_rss = peak.ok() ? *peak : 0;
  *options.report = std::move(report);
}

// Removes what an earlier gather into `out_path` left when it was killed: OUT.tmp.PID, PID gone
// from this host (os::RemoveDeadTemporaries); a running process's are named in a warning. The
// caller holds OUT's lock, so no gather of this host writes OUT now; on a shared file system
// another host's could, and lose its temporary file: its rename then fails, naming OUT; no wrong
// file results. Best effort: OUT's own errors come when it is created.
void RemoveDeadTemporaryOf(const std::string& out_path, std::ostream& log) {
  const fs::path path(out_path);
  const std::string dir = path.has_parent_path() ? path.parent_path().string() : ".";
  const std::string name = path.filename().string();
  std::vector<std::string> left;
  (void)os::RemoveDeadTemporaries(
      dir, [&](std::string_view base) { return base == name; }, &left)
      .ok();
  for (const std::string& temp : left) log << os::LeftAloneWarning(dir, temp) << "\n";
}

// The one safetensors file at `out_path` that GatherCheckpoint writes, planned for `tensors`
// (WholeTensors) with the checkpoint's `metadata` into `file`, whose sink (returned, owned by
// `file`) is not opened yet.
absl::StatusOr<safetensors::OutputFiles*> PlanOneFile(
    const std::vector<StreamTensor>& tensors, const std::string& out_path,
    const std::map<std::string, std::string>& metadata, formats::RankFile& file) {
  std::vector<TensorInfo> infos;
  for (const StreamTensor& t : tensors) infos.push_back({t.name, t.dtype, t.shape, 0, 0});
  std::vector<TensorInfo> placed;
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<safetensors::OutputFile> files,
      safetensors::PlanOutputFiles(infos, std::vector<size_t>(infos.size(), 0), {out_path},
                                   metadata, &placed));
  auto out = std::make_unique<safetensors::OutputFiles>(std::move(files));
  safetensors::OutputFiles* const planned = out.get();
  file.sink = std::move(out);
  for (const TensorInfo& info : placed) file.dest.push_back({static_cast<int64_t>(info.begin)});
  return planned;
}

// `names` as paths in `dir`.
std::vector<std::string> PathsIn(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back((fs::path(dir) / name).string());
  return paths;
}

}  // namespace

absl::Status GatherCheckpoint(const std::string& in_dir, const std::string& out_path,
                              std::ostream& log, const GatherOptions& options) {
  SHARDKIT_RETURN_IF_ERROR(formats::CheckOutputFile(
      out_path, {.keep_out_of = {{in_dir, "the shard directory it would be read from"}}}));
  SHARDKIT_ASSIGN_OR_RETURN(const GatherInput input, OpenInput(in_dir, options, log));
  SHARDKIT_ASSIGN_OR_RETURN(const std::vector<StreamTensor> tensors, WholeTensors(*input.source));
  formats::RankFile file;
  SHARDKIT_ASSIGN_OR_RETURN(safetensors::OutputFiles* const out,
                            PlanOneFile(tensors, out_path, input.source->header().metadata, file));
  // One writer of OUT at a time: a second is told so at once (the lock sits beside OUT). Without
  // OUT's directory there is nothing to lock: creating OUT fails below, naming it.
  std::optional<os::DirectoryLock> lock;
  const fs::path parent = fs::path(out_path).parent_path();
  std::error_code ec;
  if (fs::is_directory(parent.empty() ? fs::path(".") : parent, ec)) {
    SHARDKIT_ASSIGN_OR_RETURN(lock, os::DirectoryLock::AcquireForFile(out_path));
  }
  RemoveDeadTemporaryOf(out_path, log);
  const int64_t total = TotalBytes(tensors);
  Progress meter = MakeMeter(log, options, total);
  const std::string untouched =
      fs::exists(out_path, ec) ? absl::StrCat(out_path, " still holds the earlier file, untouched")
                               : absl::StrCat("nothing is at ", out_path);
  os::ScopedInterruptReport report;
  report.Set({.program = "shardkit gather", .state = untouched});
  SHARDKIT_RETURN_IF_ERROR(out->Open());
  // From here until the rename, OUT's temporary file exists: while it does, OUT is untouched.
  report.Set({.program = "shardkit gather",
              .state = absl::StrCat(out_path, " holds the complete new file"),
              .probe = os::TemporaryPath(out_path),
              .state_if_probe_present = untouched});
  SHARDKIT_RETURN_IF_ERROR(Gather(input, tensors, total, file, options, meter));
  Report(options, input, total, meter, {.out = out_path, .files = {out_path}});
  return absl::OkStatus();
}

absl::Status GatherHuggingFace(const std::string& in_dir, const std::string& out_dir,
                               int64_t max_file_bytes, std::ostream& log,
                               const GatherOptions& options) {
  SHARDKIT_RETURN_IF_ERROR(CheckOutsideInput(in_dir, out_dir));
  SHARDKIT_ASSIGN_OR_RETURN(const GatherInput input, OpenInput(in_dir, options, log));
  SHARDKIT_ASSIGN_OR_RETURN(const std::vector<StreamTensor> tensors, WholeTensors(*input.source));
  const hf::HfOutput writer(max_file_bytes);
  const formats::OutputContent content{.world_size = 1,
                                       .src_rank = 0,
                                       .tensors = tensors,
                                       .written_by = "gather",
                                       .metadata = &input.source->header().metadata};
  const std::vector<std::string> paths = PathsIn(out_dir, writer.RankFileNames(0, content));
  const std::string index_path = (fs::path(out_dir) / writer.last_file_name()).string();
  os::CreatedDirectories created;
  absl::StatusOr<os::DirectoryLock> lock = hf::LockEmptyDirectory(out_dir, &created);
  if (!lock.ok()) {
    created.RemoveIfEmpty();
    return lock.status();
  }
  os::ScopedInterruptReport report;
  const std::string none = absl::StrCat(out_dir, " holds none of this run's files");
  const std::string removed = absl::StrCat(out_dir, ", which this run had created, is removed");
  report.Set({.program = "shardkit gather", .state = none, .state_if_removed = removed});
  // Until the index is written, an interrupt removes every file of this run's: `out_dir` was
  // empty, and its files are no checkpoint without the index.
  std::vector<os::InterruptCleanup> outputs;
  for (const std::string& path : paths) {
    outputs.push_back(os::InterruptCleanup::Register(path, os::CleanupKind::kOutputFile));
  }
  outputs.push_back(os::InterruptCleanup::Register(index_path, os::CleanupKind::kOutputFile));
  const int64_t total = TotalBytes(tensors);
  Progress meter = MakeMeter(log, options, total);
  formats::RankFile file;
  absl::Status status = writer.CreateRankFile(out_dir, 0, content, file);
  if (status.ok()) status = Gather(input, tensors, total, file, options, meter);
  if (status.ok()) status = writer.WriteLastFile(out_dir, content);  // last
  if (!status.ok()) {
    if (file.sink != nullptr) file.sink->RemoveCommitted();
    created.RemoveIfEmpty();  // while the lock is held
    return status;
  }
  report.Set({.program = "shardkit gather",
              .state = absl::StrCat(out_dir, " holds the complete checkpoint"),
              .state_if_removed = removed,
              .state_if_outputs_removed = none});
  outputs.clear();
  Report(options, input, total, meter,
         {.out = out_dir, .files = paths, .index_path = paths.size() > 1 ? index_path : ""});
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
