// GatherCheckpoint: `shardkit gather` as a library — reassembles the original checkpoint from a
// shard directory written by ShardCheckpoint (shard_dir.h), as one safetensors file or as a
// Hugging Face multi-file checkpoint (GatherHuggingFace, hf_output.h); GatherTo chooses between
// them (and GatherToDcp) as the command's flags do.
//
//   SHARDKIT_RETURN_IF_ERROR(GatherCheckpoint("shards", "model.safetensors", std::cerr));
//   SHARDKIT_RETURN_IF_ERROR(GatherHuggingFace("shards", "hf", 500'000'000, std::cerr));
//
// index.json is validated first (ReadIndex: schema, specs, tiling, naming); then every shard it
// lists must be in its rank file with the parameter's dtype and the shard's sizes, and no rank
// file may hold a tensor the index does not list. Sharded parameters are rebuilt from their
// shards; replicated ones are the source rank's copy. The output has its header keys sorted,
// __metadata__ restored, and the same names, dtypes, shapes and bytes as the checkpoint that was
// sharded.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_GATHER_CHECKPOINT_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_GATHER_CHECKPOINT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/source/selected_source.h"
#include "integration/checkpoint/stream/memory_budget.h"

namespace shardkit::checkpoint {

// What a gather did, for its caller to show (`shardkit gather` prints it as its summary line,
// integration/report/run_summary.h).
struct GatherReport {
  int64_t parameters = 0;                 // tensors written
  int64_t bytes = 0;                      // their bytes
  int64_t rank_files = 0;                 // the input's files: a shard directory's rank files (its
                                          // world size) or a DCP checkpoint's .distcp files
  std::string input_kind = "rank files";  // what they are: "rank files", ".distcp files"
  std::string out;                 // the output path (GatherCheckpoint) or directory, as given
  std::vector<std::string> files;  // the data files written, in order, as paths
  std::string index_path;  // GatherHuggingFace with 2+ files, GatherToDcp: its index; else empty
  double seconds = 0;      // reading and writing the data
  int64_t peak_rss = 0;    // VmHWM at the end (0 if /proc cannot tell)
};

struct GatherOptions {
  // --include/--exclude/--strip-prefix (and --strict for their warnings): which tensors are
  // written, under which names (source/selected_source.h). Empty: every tensor, as saved.
  TensorSelection select;
  bool progress = false;                       // progress lines on `log`
  int64_t memory_bytes = kDefaultMemoryBytes;  // at most this much tensor data in memory at once
  GatherReport* report = nullptr;              // filled in on success, when set
};

// Writes `out_path` durably (fsync, rename, directory fsync), window by window: every byte is
// read once with pread into one of two reused windows (short pieces through a small staging
// buffer) and written at its final offset, so memory stays within `options.memory_bytes`
// whatever the checkpoint's size. Progress lines go to `log` when enabled; what was written goes to
// `options.report` when set (no summary is printed).
// Before anything is read, `out_path` must pass formats::CheckOutputFile: outside `in_dir`, not a
// symbolic link nor anything but a regular file, and if it exists a safetensors file (replaced).
// Then it removes `out_path.tmp.PID` files whose process is gone from this host (an earlier
// gather killed); a running process's are left alone. Interrupted (core/os/interrupt.h), it removes
// its temporary file and says whether `out_path` is untouched or complete.
// Errors: kNotFound if index.json or a rank file is missing; kInvalidArgument for an output path
// refused by formats::CheckOutputFile or that cannot be written, an invalid index, a malformed rank
// file, a shard that is missing or has the wrong dtype or shape, or an unlisted tensor;
// kUnavailable for I/O errors.
[[nodiscard]] absl::Status GatherCheckpoint(const std::string& in_dir, const std::string& out_path,
                                            std::ostream& log, const GatherOptions& options = {});

// The same output as a Hugging Face checkpoint in directory `out_dir`: the tensors, in name order,
// go to files by AssignFiles (hf_output.h) with at most `max_file_bytes` (> 0) of tensor data per
// file unless one tensor alone is larger, each file with the __metadata__; then
// model.safetensors.index.json. One file is model.safetensors alone, with no index. The files are
// the Hugging Face writer's (hf::HfOutput, hf_writer.h, a formats::OutputWriter: its rank file
// for a world of one, then its last file). The same pipeline and budget as GatherCheckpoint write
// them one after the other, committed durably (fsync, rename, directory fsync) in file order as
// safetensors::OutputFiles does; the index comes last, so a
// run killed (SIGKILL) before it leaves temporary files, perhaps some complete ones, but no
// index. A failed or interrupted (SIGINT, SIGTERM, SIGHUP) run removes what it wrote, and
// `out_dir` with the parents it created if this run created them. `out_dir` must lie outside
// `in_dir` (CheckOutsideInput); it is created if missing and must be empty but for the temporary
// files of an output whose process is gone (removed: LockEmptyDirectory); the lock
// os::DirectoryLock takes on it is held for the run and its file (.shardkit.lock) removed at the
// end, so that `out_dir` holds only the checkpoint.
// Errors: as GatherCheckpoint; kInvalidArgument if `out_dir` is inside `in_dir`, is not a
// directory, cannot be created or is not empty, or if another run holds its lock.
[[nodiscard]] absl::Status GatherHuggingFace(const std::string& in_dir, const std::string& out_dir,
                                             int64_t max_file_bytes, std::ostream& log,
                                             const GatherOptions& options = {});

// `shardkit gather --format dcp`: the shard directory or DCP checkpoint `in_dir` rewritten as a
// PyTorch DCP checkpoint of one rank in `out_dir` (every tensor one chunk of __0_0.distcp, then
// .metadata): a reshard of a world of one (this process alone, no ranks) with a plan of no rules,
// under `options.memory_bytes`, with ReshardCheckpoint's guarantees (reshard_checkpoint.h: the
// lock, nothing half-written, .metadata last). `options.report`, when set, gets what gather
// reports: the output's files are out_dir/__0_0.distcp and its index out_dir/.metadata.
// Errors: as ReshardCheckpoint's.
[[nodiscard]] absl::Status GatherToDcp(const std::string& in_dir, const std::string& out_dir,
                                       std::ostream& log, const GatherOptions& options);

// `shardkit gather`'s choice of output (its --format and --max-shard-size, Python's
// gather_checkpoint arguments): which of the three calls above writes `out`.
struct GatherOutput {
  OutputFormat format = OutputFormat::kShardkit;  // kDcp: GatherToDcp into directory `out`
  // > 0: GatherHuggingFace into directory `out` with files of at most this many tensor bytes;
  // 0: GatherCheckpoint into the one file `out`. Only with kShardkit.
  int64_t max_file_bytes = 0;
};

// GatherCheckpoint, GatherHuggingFace or GatherToDcp, as `output` says.
// Errors: kInvalidArgument for max_file_bytes with kDcp, or below 0; those of the call made.
[[nodiscard]] absl::Status GatherTo(const std::string& in_dir, const std::string& out,
                                    const GatherOutput& output, std::ostream& log,
                                    const GatherOptions& options);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_GATHER_CHECKPOINT_H_
