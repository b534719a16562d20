// ShardCheckpoint: `shardkit shard` as a library — every rank of a communicator ends up with a
// safetensors file of its shards of a checkpoint, and the source rank writes index.json.
// `shardkit reshard` (an earlier shard directory laid out anew) is reshard_checkpoint.h.
//
//   ShardCheckpointOptions options{.checkpoint_path = "model.safetensors",
//                                  .write = {.plan_path = "plan.json", .out_dir = "shards"}};
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, ConnectFromEnv());
//   SHARDKIT_RETURN_IF_ERROR(ShardCheckpoint(options, *comm, std::cerr));
//
// Steps (each local failure is shared with every rank by a collective status round, so all ranks
// fail together with the same message):
//  1. Every rank parses its plan (flags override src_rank and strategy) and checks the output
//     directory: shardkit's own output only (OutputDirectory, output_directory.h); the source
//     creates it if missing (the others, should they still not see it, in step 4) and opens the
//     checkpoint and validates its header.
//  2. The source sends the header (names, dtypes, shapes, __metadata__) to every rank; no other
//     rank opens the checkpoint before step 3. Every rank binds the plan to it (plan_binding.h).
//  3. The engine's agreement on the whole plan (AgreeOnPlan), before any data moves; then, on the
//     agreed layouts (so alike on every rank), the FP8 block-scale check (fp8_scales.h). Under
//     strategy direct every other rank then opens the checkpoint at its own checkpoint_path, and
//     the ranks agree that they all see the source's files (checkpoint_identity.h): a rank that
//     cannot open them, or sees other ones, fails every rank here.
//  4. The source takes the directory's lock (DIR/.shardkit.lock, held until it returns: one
//     writer at a time; another run's is exit 2 on every rank) and chooses where the run writes
//     (OutputDirectory::Begin): DIR, cleared of an interrupted run's files, or — over a complete
//     earlier output, which stays untouched until the commit — a new directory beside DIR; the
//     choice reaches every rank (one AllGather); then every rank creates its file
//     rank-RRRRR.safetensors there under a temporary name, header written, at its final size.
//  5. The data moves in rounds under the memory budget (stream_shard.h): the source reads each
//     byte of the checkpoint once, every rank writes its bytes at their final offsets (direct:
//     every rank reads only its own bytes itself; no tensor byte crosses the network).
//  6. Every rank fsyncs and renames its file, then fsyncs the directory; after one more status
//     round the source writes index.json the same way, and commits (OutputDirectory::Commit: over
//     an earlier output, the swap that puts the new directory at DIR's path). So at every instant
//     DIR holds the complete earlier output or the complete new one. A last status round gives
//     every rank the commit's outcome.
// A failed run removes this rank's temporary file, and what the run wrote (OutputDirectory::
// Abandon: the new directory beside DIR, or DIR's new files; DIR with the parents this rank
// created, if nothing is left in them). An interrupted one removes its temporary files in the
// signal handler (core/os/interrupt.h), where the source prints what DIR holds: still the earlier
// output, untouched; no index.json (nor before this run); the complete new output; or removed
// (this run had created it).
//
// Output on `log` (the source rank only): warnings (plan rules that take no parameter — matching
// none, or shadowed by earlier rules — and the FP8 scale check's) and progress lines when enabled.
// No summary: `write.report`, when set, receives the run's ShardRunReport (shard_run_report.h:
// per rank bytes read and written, peak RSS and its growth while the data moved) for the caller
// to show (`shardkit shard` prints it as a table, integration/report/run_summary.h).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_CHECKPOINT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "integration/checkpoint/fp8_scales.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/shard_run_report.h"
#include "integration/checkpoint/source/selected_source.h"
#include "integration/checkpoint/stream/memory_budget.h"
#include "specs/plan.h"

namespace shardkit::checkpoint {

// What one rank did, for callers and tests that check the memory bound.
struct ShardCheckpointStats {
  int64_t bytes_written = 0;  // tensor bytes this rank wrote into its file
  int64_t bytes_read = 0;     // bytes this rank pread from the checkpoint (the source of scatter
                              // and broadcast: each byte once, ≈ its size; direct and reshard:
                              // its own shards', ≤ 1.25 × them for pieces ≥ 4 KiB apart)
  int64_t buffer_bytes = 0;   // this rank's streaming windows and buffers (within memory_bytes)
  int64_t rounds = 0;
  int64_t peak_rss = 0;    // VmHWM at the end
  int64_t rss_growth = 0;  // VmHWM at the end minus VmHWM (reset) just before data moved
};

// What `shard` and `reshard` share (ShardCheckpointOptions::write,
// ReshardCheckpointOptions::write): the plan, the shard directory written, how the run goes.
struct ShardWriteOptions {
  std::string plan_path;
  // A program's plan itself, instead of reading plan_path (which then only names it in messages);
  // reshard applies it as given (src_rank 0 and strategy direct are the caller's to set).
  std::optional<specs::Plan> plan;
  // The plan's JSON text (a program's), read as the file at plan_path would be (reshard's warnings
  // included) instead of reading it; plan_path then only names it. Ignored when `plan` is set.
  std::string plan_json;
  std::string out_dir;
  bool progress = false;  // progress lines on `log` (the source) while the data moves
  // No rank holds more than this much tensor data at once (stream_shard.h, SplitBudget).
  int64_t memory_bytes = kDefaultMemoryBytes;
  // FP8 weights and their `_scale_inv` scales must be cut on the same blocks (fp8_scales.h).
  Fp8ScaleOptions fp8;
  // --strict: plan rules that take no parameter (matching none, or shadowed by earlier rules) are
  // errors, not warnings (plan_binding.h, BindPlan).
  bool strict = false;
  // --allow-replicated-only: a plan that shards nothing (every rank gets every parameter whole) is
  // meant; without it, such a plan is an error (plan_binding.h, BindPlan).
  bool allow_replicated_only = false;
  // kDcp (`--format dcp`): a PyTorch DCP checkpoint instead of a shard directory — every rank
  // writes __R_0.distcp (formats/dcp/dcp_rank_file.h), the source .metadata last instead of
  // index.json; "earlier output" is then .metadata, __R.metadata and __R_K.distcp.
  OutputFormat format = OutputFormat::kShardkit;
  // reshard --include/--exclude: only these of the input's tensors (and, into a DCP output, of its
  // non-tensor items) are written (source/selected_source.h). Every rank must be given the same.
  TensorSelection select;
  CallOptions call;  // deadline of the whole run: every collective step shares it
  ShardCheckpointStats* stats = nullptr;  // filled in for this rank on success, when set
  ShardRunReport* report = nullptr;       // the whole run, on every rank on success, when set
};

struct ShardCheckpointOptions {
  std::string checkpoint_path;      // opened by the source rank only (by every rank under direct)
  std::optional<int64_t> src_rank;  // flag > plan > default
  std::optional<specs::Strategy> strategy;
  ShardWriteOptions write;
};

// Collective over `comm` (ranks of `comm` are the ranks of the plan and of the output).
// Errors (the same on every rank unless a transport error cuts a rank off):
// kInvalidArgument / kNotFound for bad input — unreadable or invalid plan (naming the JSON path),
// src_rank outside the world, a missing or malformed checkpoint, a parameter name with '#', an
// output directory that cannot be created or holds foreign files, ranks disagreeing about their
// inputs (memory budget, FP8 options and strict included), under strict an idle rule or a plan
// that shards nothing, an FP8 weight or its scales cut off its blocks
// (unless fp8.allow_misaligned); kDeadlineExceeded / kUnavailable / kFailedPrecondition when a peer
// dies or a deadline passes; kUnavailable for I/O errors while writing.
[[nodiscard]] absl::Status ShardCheckpoint(const ShardCheckpointOptions& options,
                                           Communicator& comm, std::ostream& log);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_CHECKPOINT_H_
