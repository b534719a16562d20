#include "integration/checkpoint/shard_checkpoint.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "core/os/files.h"
#include "core/os/proc_status.h"
#include "integration/checkpoint/header_exchange.h"
#include "integration/checkpoint/internal/write_shard_directory.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/plan_binding.h"
#include "integration/checkpoint/progress.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/checkpoint_identity.h"
#include "integration/checkpoint/source/checkpoint_source.h"
#include "integration/checkpoint/source/dcp_source.h"
#include "integration/checkpoint/source/saved_directory.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"
#include "integration/formats/output_file/output_directory.h"
#include "integration/formats/output_file/output_writer.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

// Everything one rank knows about the run, filled in step by step.
struct Run {
  const ShardCheckpointOptions& options;
  Communicator& comm;
  std::ostream& log;
  bool resharding = false;  // ReshardCheckpoint: `options.checkpoint_path` is a shard directory
  specs::Plan plan;         // flags applied
  std::unique_ptr<TensorSource> source;  // the source rank (every rank under direct)
  bool input_dcp = false;  // reshard: the input is a DCP checkpoint, not a shard directory
  const DcpSource* dcp_input = nullptr;  // reshard: the input, when it has DCP metadata
  formats::OutputItems items;    // the source, into a format that holds them: the input's items
  int64_t input_files = 0;       // reshard: its rank files (its world size) or DCP's data files
  std::string input_files_kind;  // reshard: what those are (SavedDirectory::files_kind)
  absl::Status open_status;      // reshard, not the source: opening it (reported in AgreeOnFiles)
  std::optional<OutputDirectory> out;  // where this run writes; the source holds its lock
  safetensors::Header header;          // the source's, on every rank
  std::vector<specs::ResolvedParameter> resolved;  // header order (the files follow the agreement)
  Module module;                                   // meta tensors, header order
  std::vector<std::string> warnings;
  std::optional<StreamSchedule> schedule;
  StreamOutput output;  // this rank's file, until committed
  StreamStats stream;
  double plan_seconds = 0;  // from the start until the data moved: inputs, agreement, files
  double stream_seconds = 0;
  std::vector<ShardRunRank> reports;  // every rank's, from GatherReports

  bool is_source() const { return comm.rank() == plan.src_rank; }
  const formats::OutputWriter& writer() const { return OutputWriterOf(options.write.format); }
  bool reshard() const { return resharding; }
  // A shard directory's source reads through a staging buffer of its own: two of them.
  Budget budget() const { return SplitBudget(options.write.memory_bytes, reshard() ? 2 : 1); }
};

// The plan, flags applied. `shardkit reshard` (ReadPlanFile): every rank reads its new shards from
// the old directory (strategy direct), rank 0 writes index.json, and the output must lie outside
// the input.
absl::Status LoadPlan(Run& run) {
  const ShardCheckpointOptions& options = run.options;
  if (options.write.plan) {
    run.plan = *options.write.plan;
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(run.plan, ReadPlanFile(options.write.plan_path, run.reshard(),
                                                     &run.warnings, options.write.plan_json));
  }
  if (run.reshard()) return CheckOutsideInput(options.checkpoint_path, options.write.out_dir);
  if (options.src_rank) run.plan.src_rank = *options.src_rank;
  if (options.strategy) run.plan.strategy = *options.strategy;
  if (run.plan.src_rank < 0 || run.plan.src_rank >= run.comm.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("src_rank ", run.plan.src_rank,
                                                   " is outside the world of ",
                                                   run.comm.world_size(), " ranks"));
  }
  return absl::OkStatus();
}

// Into a format that holds non-tensor items, from a DCP input, on the source: the input's items
// that the selection picks (their bytes as they are), renamed as its tensors are, and the
// planner_data paths of the names kept as they were (a renamed key gets (key,)). Errors: as
// DcpSource::ReadItems; kInvalidArgument for an item whose new name is a tensor's or another
// item's.
absl::Status CarryItems(Run& run) {
  if (!run.writer().holds_items() || !run.is_source() || run.dcp_input == nullptr) {
    return absl::OkStatus();
  }
  const TensorSelection& select = run.options.write.select;
  using Items = std::map<std::string, std::string>;
  SHARDKIT_ASSIGN_OR_RETURN(Items items, run.dcp_input->ReadItems([&](const std::string& key) {
    return select.Picks(key);
  }));
  std::set<std::string> names;
  for (const safetensors::TensorInfo& info : run.source->header().tensors) names.insert(info.name);
  for (auto& [key, bytes] : items) {
    const std::string name = select.Renamed(key);
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--strip-prefix ", QuoteName(select.strip_prefix), " gives the non-tensor item ",
          QuoteName(key), " the name ", QuoteName(name), ", which another tensor or item has"));
    }
    run.items.bytes.emplace(name, std::move(bytes));
  }
  for (const auto& [key, path] : run.dcp_input->metadata().planner_data) {
    if (select.Renamed(key) == key) run.items.paths.emplace(key, path);
  }
  return absl::OkStatus();
}

absl::Status OpenCheckpoint(Run& run, std::vector<std::string>* warnings) {
  if (run.reshard()) {
    const TensorSelection& select = run.options.write.select;
    SHARDKIT_RETURN_IF_ERROR(ValidateSelection(select));
    SHARDKIT_ASSIGN_OR_RETURN(SavedDirectory saved, OpenSavedDirectory(run.options.checkpoint_path,
                                                                       run.budget().staging));
    run.input_dcp = saved.dcp;
    run.dcp_input = saved.dcp_source;
    run.input_files = saved.files;
    run.input_files_kind = saved.files_kind;
    // Into a format that holds them the picked items go along (CarryItems); elsewhere they are
    // dropped.
    SHARDKIT_ASSIGN_OR_RETURN(
        run.source,
        SelectSaved(saved, select, /*items_carried=*/run.writer().holds_items(), warnings));
    return CarryItems(run);
  }
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointPath where,
                            ResolveCheckpointPath(run.options.checkpoint_path));
  SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::Open(where, warnings));
  run.source = std::make_unique<CheckpointSource>(std::move(source));
  return absl::OkStatus();
}

// Step 1 (local): plan, output directory; the source opens the checkpoint.
// Under reshard every rank opens the shard directory here, all at once (parsing a large
// index.json is most of planning); another rank's failure to is reported with the identity check
// (AgreeOnFiles), naming the rank.
absl::Status LoadInputs(Run& run) {
  SHARDKIT_RETURN_IF_ERROR(LoadPlan(run));
  // Only the source creates a missing DIR, so that on a shared file system the rank that holds
  // the lock knows whether this run created DIR (CleanUpAfterFailure). The others check an existing
  // one, and create theirs in step 4 should it still be missing (another host's disk).
  SHARDKIT_ASSIGN_OR_RETURN(run.out,
                            PrepareOutput(run.options.write.out_dir, run.options.write.format,
                                          /*owner=*/run.is_source()));
  if (run.is_source()) {
    run.out->ReportInterrupts(run.reshard() ? "shardkit reshard" : "shardkit shard",
                              run.comm.world_size() > 1 ? "here (every rank removes its own)" : "");
    return OpenCheckpoint(run, &run.warnings);
  }
  if (run.reshard()) {
    std::vector<std::string> warnings;  // the source's are kept; others' would repeat them
    run.open_status = OpenCheckpoint(run, &warnings);
  }
  return absl::OkStatus();
}

// Step 2: every rank's options, then the source's header, reach every rank (collective; errors
// as AllGather).
absl::StatusOr<std::vector<std::string>> ShareHeader(Run& run, const CallOptions& call) {
  std::string mine = EncodeRankOptions(run.options.write);
  if (run.source) mine += EncodeHeader(run.source->header());
  return run.comm.AllGather(ConstBuffer(mine), call);
}

// Step 2 (local): parameters from the header, plan bound to them (plan_binding.h: idle rules are
// warnings, or under --strict errors), a Module of meta tensors. Every rank received the same
// header, so ranks given the same plan reach the same verdict; the status round after this step
// makes it collective either way.
absl::Status ResolveParameters(Run& run, const std::vector<std::string>& shared) {
  SHARDKIT_RETURN_IF_ERROR(CheckSameOptions(shared));
  const std::string_view header_bytes =
      std::string_view(shared[static_cast<size_t>(run.plan.src_rank)]).substr(kRankOptionsBytes);
  SHARDKIT_ASSIGN_OR_RETURN(run.header, DecodeHeader(header_bytes, run.plan.src_rank));
  SHARDKIT_ASSIGN_OR_RETURN(
      run.resolved, BindPlan(run.plan, run.header, run.comm.world_size(),
                             {.plan_path = run.options.write.plan_path,
                              .strict = run.options.write.strict,
                              .allow_replicated_only = run.options.write.allow_replicated_only},
                             &run.warnings));
  for (const safetensors::TensorInfo& info : run.header.tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(info.shape, info.dtype));
    SHARDKIT_RETURN_IF_ERROR(run.module.AddParameter(info.name, std::move(meta)));
  }
  return absl::OkStatus();
}

// The rounds' size (RoundWindow): under direct every rank reads its share of a window itself, so
// the window grows with the world; a scatter or broadcast source holds two whole windows.
int64_t Window(const Run& run, const std::vector<StreamTensor>& tensors) {
  int64_t total = 0;
  for (const StreamTensor& tensor : tensors)
    total += static_cast<int64_t>(tensor.end - tensor.begin);
  const int64_t target = run.plan.strategy == specs::Strategy::kDirect
                             ? kRankRoundBytes * run.comm.world_size()
                             : kScatterRoundBytes;
  return RoundWindow(run.budget(), target, total);
}

// Step 3: every rank agrees on the whole plan (the engine's agreement: names, bound specs,
// shapes, dtypes, src_rank, strategy), before any data moves.
absl::Status AgreeOnLayouts(Run& run, const CallOptions& call) {
  ShardOptions options{
      .src_rank = static_cast<int>(run.plan.src_rank), .strategy = run.plan.strategy, .call = call};
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<AgreedParameter> agreed,
                            AgreeOnPlan(run.module, run.plan, run.comm, {}, options));
  // On agreed data, so the same verdict on every rank: FP8 scales, sub-byte cuts.
  SHARDKIT_ASSIGN_OR_RETURN(
      std::vector<StreamTensor> tensors,
      CheckLayouts(run.header, std::move(agreed), run.options.write.fp8, &run.warnings));
  const int64_t window = Window(run, tensors);
  run.schedule.emplace(std::move(tensors), run.comm.world_size(), window);
  return absl::OkStatus();
}

// Step 3, direct only (once every rank agrees on the strategy): every other rank opens the
// checkpoint at its own path too, and all agree that they see the source's files (collective).
absl::Status AgreeOnFiles(Run& run, const CallOptions& call) {
  if (run.plan.strategy != specs::Strategy::kDirect) return absl::OkStatus();
  std::vector<std::string> warnings;  // the source's were kept; others' would repeat them
  const absl::Status opened = run.source      ? absl::OkStatus()
                              : run.reshard() ? run.open_status
                                              : OpenCheckpoint(run, &warnings);
  const absl::StatusOr<const TensorSource*> mine =
      opened.ok() ? absl::StatusOr<const TensorSource*>(run.source.get()) : opened;
  return AgreeOnCheckpoint(run.comm, mine, run.options.checkpoint_path,
                           static_cast<int>(run.plan.src_rank), call,
                           run.reshard() ? "shard directory" : "checkpoint");
}

// Step 4 (the source, once every rank agrees who that is): takes the directory's lock, held until
// the run ends (one writer at a time), and chooses where this run writes: into DIR, cleared of an
// interrupted run's files, or beside a complete earlier output, which stays until the commit
// (output_directory.h).
absl::Status LockAndChoose(Run& run) {
  if (!run.is_source()) return absl::OkStatus();
  SHARDKIT_RETURN_IF_ERROR(run.out->Begin());
  for (const std::string& warning : run.out->warnings()) run.warnings.push_back(warning);
  return absl::OkStatus();
}

// Step 4: the source's choice reaches every rank (collective; errors as AllGather).
absl::StatusOr<std::string> SharePlace(Run& run, const CallOptions& call) {
  const std::string mine = run.is_source() ? run.out->place() : "";
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            run.comm.AllGather(ConstBuffer(mine), call));
  return all[static_cast<size_t>(run.plan.src_rank)];
}

// How the data reaches the files, as index.json records it.
WrittenBy WrittenByOf(const Run& run) {
  return run.reshard() ? WrittenBy::kReshard : WrittenByShard(run.plan.strategy);
}

// What the ranks write, for the output format: the agreed layouts, the checkpoint's __metadata__
// (the old index.json's under reshard: on every rank, with the header), the source's items.
formats::OutputContent Content(const Run& run) {
  return {.world_size = run.comm.world_size(),
          .src_rank = static_cast<int>(run.plan.src_rank),
          .tensors = run.schedule->tensors(),
          .written_by = WrittenByName(WrittenByOf(run)),
          .metadata = &run.header.metadata,
          .items = &run.items};
}

// Step 4 (local): this rank's file under its temporary name, at its final size, everything but
// the tensors' bytes written, and where each of its tensors' bytes go
// (formats::OutputWriter::CreateRankFile). DIR is created here if this rank does not see it
// (OutputDirectory::Follow).
absl::Status CreateOwnFile(Run& run, std::string_view place) {
  if (!run.is_source()) SHARDKIT_RETURN_IF_ERROR(run.out->Follow(place));
  return run.writer().CreateRankFile(run.out->write_dir(), run.comm.rank(), Content(run),
                                     run.output);
}

// Step 5: the rounds (stream_shard.h), with progress on the source. The peak RSS is reset first,
// so that the report's growth is what moving the data took.
absl::Status Stream(Run& run, const CallOptions& call) {
  const Budget budget = run.budget();
  Progress progress(run.log, run.options.write.progress && run.is_source(),
                    run.reshard() ? "shardkit reshard: reading" : "shardkit shard: streaming",
                    run.schedule->rounds(), run.schedule->total_bytes(), "rounds");
  int64_t rounds_done = 0;
  StreamOptions options{.src_rank = static_cast<int>(run.plan.src_rank),
                        .broadcast = run.plan.strategy == specs::Strategy::kBroadcast,
                        .direct = run.plan.strategy == specs::Strategy::kDirect,
                        .staging_bytes = budget.staging,
                        .call = call,
                        .on_round = [&](int64_t bytes) { progress.Step(++rounds_done, bytes); }};
  SHARDKIT_ASSIGN_OR_RETURN(
      run.stream, StreamShards(*run.schedule, run.source.get(), run.output, run.comm, options));
  // A shard directory's bytes are pread by its own reader: what the stream asked it for, as
  // bytes from its rank files.
  if (const auto reads = run.source ? run.source->file_reads() : std::nullopt) {
    run.stream.bytes_read = reads->bytes;
  }
  run.stream_seconds = progress.Elapsed();
  return absl::OkStatus();
}

// Step 6 (local): this rank's file made durable under its final name.
absl::Status CommitRankFile(Run& run) {
  absl::Status status = run.output.sink->Commit();
  run.output.sink.reset();
  return status;
}

// Reshard: how many of the input's files (old rank files, `.distcp` files) this rank read.
int64_t OldFilesRead(const Run& run) {
  const auto reads = run.source ? run.source->file_reads() : std::nullopt;
  return reads ? reads->files : 0;
}

// Step 7: every rank's report reaches every rank (collective; errors as AllGather).
absl::Status GatherReports(Run& run, int64_t hwm_before, const CallOptions& call) {
  absl::StatusOr<int64_t> peak = os::ProcStatusBytes("VmHWM");
  const int64_t hwm = peak.ok() ? *peak : 0;
  const std::string mine =
      absl::StrCat(run.stream.bytes_read, " ", OldFilesRead(run), " ", run.stream.bytes_written,
                   " ", hwm, " ", std::max<int64_t>(0, hwm - hwm_before));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            run.comm.AllGather(ConstBuffer(mine), call));
  for (const std::string& text : all) {
    ShardRunRank& report = run.reports.emplace_back();
    std::istringstream in(text);
    in >> report.bytes_read >> report.files_read >> report.bytes_written >> report.peak_rss >>
        report.rss_growth;
  }
  return absl::OkStatus();
}

// What the caller shows (ShardWriteOptions::report): totals, then per rank its file, tensors,
// bytes read and written and memory (peak RSS, and its growth while the data moved).
ShardRunReport MakeReport(const Run& run, double total_seconds) {
  const std::vector<StreamTensor>& tensors = run.schedule->tensors();
  ShardRunReport report{.written_by = WrittenByOf(run),
                        .src_rank = run.plan.src_rank,
                        .world_size = run.comm.world_size(),
                        .parameters = static_cast<int64_t>(tensors.size()),
                        .moved_bytes = run.schedule->total_bytes(),
                        .rounds = run.schedule->rounds(),
                        .memory_bytes = run.options.write.memory_bytes,
                        .plan_seconds = run.plan_seconds,
                        .stream_seconds = run.stream_seconds,
                        .total_seconds = total_seconds,
                        .ranks = run.reports};
  if (run.reshard()) {
    report.in_dir = run.options.checkpoint_path;
    report.in_world_size = run.input_dcp ? 0 : run.input_files;
    if (run.input_dcp) {
      report.in_dcp_files = run.input_files;
      report.in_files_kind = run.input_files_kind;
    }
  }
  for (const StreamTensor& tensor : tensors) {
    ++(tensor.replicated ? report.replicated : report.sharded);
  }
  const std::vector<int64_t> files = run.writer().RankFileTensors(Content(run));
  for (int rank = 0; rank < report.world_size; ++rank) {
    ShardRunRank& mine = report.ranks[static_cast<size_t>(rank)];
    mine.file = run.writer().RankFileName(rank);
    mine.tensors = files[static_cast<size_t>(rank)];
  }
  return report;
}

// A failed run: this rank's temporary file is removed, then what the run wrote
// (OutputDirectory::Abandon: DIR's new files, or the new directory beside it; DIR itself if this
// run created it).
void CleanUpAfterFailure(Run& run) {
  run.output.sink.reset();
  if (run.out) run.out->Abandon();
}

// Step 8: the source writes the format's last file (index.json, `.metadata`) and commits
// (OutputDirectory::Commit), every rank learns the outcome (one status round), then the source's
// warnings go to `log`; the caller's report, when asked for, on every rank.
absl::Status Finish(Run& run, const absl::Time start, const CallOptions& call) {
  const ShardWriteOptions& write = run.options.write;
  absl::Status committed;
  if (run.is_source()) {
    committed = run.writer().WriteLastFile(run.out->write_dir(), Content(run));
    if (committed.ok()) committed = run.out->Commit();
  }
  // Every rank learns whether the output is in place (a swap can fail this late: a bind mount,
  // a parent whose permissions changed).
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(run.comm, committed, "committing the output", call));
  if (run.is_source()) {
    for (const std::string& warning : run.warnings) run.log << warning << "\n";
    run.log << std::flush;
  }
  if (write.report != nullptr) {
    *write.report = MakeReport(run, absl::ToDoubleSeconds(absl::Now() - start));
  }
  return absl::OkStatus();
}

// The steps of shard_checkpoint.h, in order.
absl::Status RunSteps(Run& run, const absl::Time start) {
  const ShardCheckpointOptions& options = run.options;
  Communicator& comm = run.comm;
  // One deadline for the whole run; every collective step below gets what is left of it.
  CallOptions call = options.write.call;
  call.deadline = comm.Deadline(options.write.call);
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, LoadInputs(run), "checking inputs", call));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> shared, ShareHeader(run, call));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, ResolveParameters(run, shared),
                                         "applying the plan to the checkpoint", call));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnLayouts(run, call));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnFiles(run, call));
  SHARDKIT_RETURN_IF_ERROR(
      AgreeOnStatus(comm, LockAndChoose(run), "preparing the output directory", call));
  SHARDKIT_ASSIGN_OR_RETURN(const std::string place, SharePlace(run, call));
  SHARDKIT_RETURN_IF_ERROR(
      AgreeOnStatus(comm, CreateOwnFile(run, place), "creating shard files", call));
  run.plan_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  (void)os::ResetPeakRss();  // best effort: the growth below is then what streaming took
  absl::StatusOr<int64_t> hwm_before = os::ProcStatusBytes("VmHWM");
  SHARDKIT_RETURN_IF_ERROR(Stream(run, call));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, CommitRankFile(run), "writing shard files", call));
  SHARDKIT_RETURN_IF_ERROR(GatherReports(run, hwm_before.ok() ? *hwm_before : 0, call));
  if (options.write.stats != nullptr) {
    const ShardRunRank& mine = run.reports[static_cast<size_t>(comm.rank())];
    *options.write.stats = {mine.bytes_written,     run.stream.bytes_read, run.stream.buffer_bytes,
                            run.schedule->rounds(), mine.peak_rss,         mine.rss_growth};
  }
  return Finish(run, start, call);
}

}  // namespace

namespace internal {

absl::Status WriteShardDirectory(const ShardCheckpointOptions& options, bool reshard,
                                 Communicator& comm, std::ostream& log) {
  const absl::Time start = absl::Now();
  Run run{options, comm, log, reshard};
  absl::Status status = RunSteps(run, start);
  if (!status.ok()) CleanUpAfterFailure(run);
  return status;
}

}  // namespace internal

absl::Status ShardCheckpoint(const ShardCheckpointOptions& options, Communicator& comm,
                             std::ostream& log) {
  return internal::WriteShardDirectory(options, /*reshard=*/false, comm, log);
}

}  // namespace shardkit::checkpoint
