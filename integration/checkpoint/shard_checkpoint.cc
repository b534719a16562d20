#include "integration/checkpoint/shard_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "integration/checkpoint/progress.h"
#include "integration/checkpoint/shard_dir.h"
#include "integration/io/dir_lock.h"
#include "integration/io/files.h"
#include "integration/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

// Everything one rank knows about the run, filled in step by step.
struct Run {
  const ShardCheckpointOptions& options;
  Communicator& comm;
  std::ostream& log;
  specs::Plan plan;                                // flags applied
  std::optional<safetensors::Reader> reader;       // the source only
  std::optional<io::DirectoryLock> lock;           // the source: held for the whole run
  safetensors::Header header;                      // the source's, on every rank
  std::vector<specs::ResolvedParameter> resolved;  // header order
  Module module;
  std::vector<std::string> warnings;
  double read_seconds = 0;
  double shard_seconds = 0;

  bool is_source() const { return comm.rank() == plan.src_rank; }
  std::string RankPath(int rank) const {
    return (std::filesystem::path(options.out_dir) / RankFileName(rank)).string();
  }
};

absl::Status LoadPlan(Run& run) {
  const ShardCheckpointOptions& options = run.options;
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, io::ReadWholeFile(options.plan_path));
  absl::StatusOr<specs::Plan> plan = specs::ParsePlan(text);
  if (!plan.ok()) return Annotate(plan.status(), options.plan_path);
  run.plan = *std::move(plan);
  if (options.src_rank) run.plan.src_rank = *options.src_rank;
  if (options.strategy) run.plan.strategy = *options.strategy;
  if (run.plan.src_rank < 0 || run.plan.src_rank >= run.comm.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("src_rank ", run.plan.src_rank,
                                                   " is outside the world of ",
                                                   run.comm.world_size(), " ranks"));
  }
  return absl::OkStatus();
}

// Step 1 (local): plan, output directory; the source opens the checkpoint.
absl::Status LoadInputs(Run& run) {
  SHARDKIT_RETURN_IF_ERROR(LoadPlan(run));
  SHARDKIT_RETURN_IF_ERROR(PrepareOutputDir(run.options.out_dir));
  if (!run.is_source()) return absl::OkStatus();
  SHARDKIT_ASSIGN_OR_RETURN(run.lock, io::DirectoryLock::Acquire(run.options.out_dir));
  SHARDKIT_ASSIGN_OR_RETURN(run.reader, safetensors::Reader::Open(run.options.checkpoint_path));
  return absl::OkStatus();
}

// The source's header as bytes: the data region's size (8 bytes, little-endian), then the JSON.
std::string EncodeHeader(const safetensors::Header& header) {
  const uint64_t data_size = header.tensors.empty() ? 0 : header.tensors.back().end;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(data_size >> (8 * i));
  return out + safetensors::SerializeHeader(header.tensors, header.metadata);
}

absl::StatusOr<safetensors::Header> DecodeHeader(std::string_view bytes, int64_t src_rank) {
  if (bytes.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", src_rank, " sent no checkpoint header (do the ranks agree on the source rank?)"));
  }
  uint64_t data_size = 0;
  for (int i = 7; i >= 0; --i) data_size = data_size << 8 | static_cast<unsigned char>(bytes[i]);
  return safetensors::ParseHeader(bytes.substr(8), data_size,
                                  absl::StrCat("checkpoint header from rank ", src_rank));
}

// Step 2: the source's header reaches every rank (collective; errors as AllGather).
absl::StatusOr<std::string> ShareHeader(Run& run, const CallOptions& call) {
  const std::string mine = run.reader ? EncodeHeader(run.reader->header()) : std::string();
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            run.comm.AllGather(ConstBuffer(mine), call));
  return std::move(all[static_cast<size_t>(run.plan.src_rank)]);
}

// Step 2 (local): parameters from the header, plan resolved, a Module of meta tensors.
absl::Status ResolveParameters(Run& run, std::string_view header_bytes) {
  SHARDKIT_ASSIGN_OR_RETURN(run.header, DecodeHeader(header_bytes, run.plan.src_rank));
  std::vector<specs::ParameterInfo> infos;
  for (const safetensors::TensorInfo& info : run.header.tensors) {
    SHARDKIT_RETURN_IF_ERROR(CheckNoShardSuffix(info.name));
    infos.push_back({info.name, info.shape});
  }
  SHARDKIT_ASSIGN_OR_RETURN(run.resolved, specs::Resolve(run.plan, infos, run.comm.world_size()));
  for (const safetensors::TensorInfo& info : run.header.tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(info.shape, info.dtype));
    SHARDKIT_RETURN_IF_ERROR(run.module.AddParameter(info.name, std::move(meta)));
  }
  std::vector<bool> used(run.plan.rules.size());
  for (const specs::ResolvedParameter& parameter : run.resolved) {
    if (parameter.rule) used[*parameter.rule] = true;
  }
  for (size_t i = 0; i < used.size(); ++i) {
    if (used[i]) continue;
    run.warnings.push_back(absl::StrCat("warning: ", run.options.plan_path, ": rules[", i, "] (\"",
                                        run.plan.rules[i].match,
                                        "\") matches no parameter of the checkpoint"));
  }
  return absl::OkStatus();
}

// Step 3 (the source): clears an earlier index.json, then reads every tensor once.
absl::Status ReadTensors(Run& run) {
  if (!run.is_source()) return absl::OkStatus();
  SHARDKIT_RETURN_IF_ERROR(RemoveEarlierOutput(run.options.out_dir, run.comm.world_size()));
  const std::vector<safetensors::TensorInfo>& tensors = run.header.tensors;
  Progress progress(run.log, run.options.progress, "shardkit shard: reading",
                    static_cast<int64_t>(tensors.size()),
                    tensors.empty() ? 0 : static_cast<int64_t>(tensors.back().end));
  for (size_t i = 0; i < tensors.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor, run.reader->ReadTensor(tensors[i].name));
    SHARDKIT_RETURN_IF_ERROR(run.module.SetTensor(tensors[i].name, std::move(tensor)));
    progress.Step(static_cast<int64_t>(i + 1), static_cast<int64_t>(tensors[i].end));
  }
  run.read_seconds = progress.Elapsed();
  run.reader.reset();
  return absl::OkStatus();
}

// Step 5 (local): this rank's shards (NAME or NAME#K) and replicated tensors, written atomically.
absl::Status WriteRankFile(const Run& run) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const std::string& name : run.module.names()) {
    SHARDKIT_ASSIGN_OR_RETURN(bool sharded, run.module.IsSharded(name));
    if (!sharded) {
      SHARDKIT_ASSIGN_OR_RETURN(const Tensor* whole, run.module.GetTensor(name));
      tensors.emplace_back(name, whole);
      continue;
    }
    SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, run.module.GetSharded(name));
    for (const LocalShard& shard : st->local_shards()) {
      tensors.emplace_back(ShardTensorName(name, st->shards(), shard.index), &shard.tensor);
    }
  }
  return safetensors::WriteFile(run.RankPath(run.comm.rank()), tensors);
}

ShardIndex BuildIndex(const Run& run) {
  ShardIndex index{
      run.comm.world_size(), run.plan.src_rank, run.plan.strategy, run.header.metadata, {}};
  for (size_t i = 0; i < run.resolved.size(); ++i) {
    const safetensors::TensorInfo& info = run.header.tensors[i];
    index.parameters.push_back(
        MakeIndexParameter(info.name, info.dtype, info.shape, run.resolved[i].layout));
  }
  std::sort(index.parameters.begin(), index.parameters.end(),
            [](const IndexParameter& a, const IndexParameter& b) { return a.name < b.name; });
  return index;
}

// The summary the source prints: totals, then per rank its file, tensors and bytes.
std::string Summary(const Run& run, const ShardIndex& index, double total_seconds) {
  const int world = run.comm.world_size();
  std::vector<int64_t> tensors(static_cast<size_t>(world)), bytes(static_cast<size_t>(world));
  int64_t replicated = 0;
  for (const IndexParameter& parameter : index.parameters) {
    if (!parameter.spec) ++replicated;
    for (const IndexShard& shard : parameter.shards) {
      const auto rank = static_cast<size_t>(shard.metadata.placement.rank());
      ++tensors[rank];
      bytes[rank] += ComputeShapeSize(shard.metadata.sizes, parameter.dtype)->nbytes;
    }
  }
  const int64_t read_bytes =
      run.header.tensors.empty() ? 0 : static_cast<int64_t>(run.header.tensors.back().end);
  std::string out = absl::StrFormat(
      "shardkit shard: %d parameters (%d sharded, %d replicated) on %d ranks, %s from rank %d\n"
      "  read %s in %.3f s (%s), sharded in %.3f s, total %.3f s\n"
      "  %-4s  %-22s  %7s  %12s\n",
      index.parameters.size(), static_cast<int64_t>(index.parameters.size()) - replicated,
      replicated, world, specs::StrategyName(index.strategy), index.src_rank,
      FormatBytes(read_bytes), run.read_seconds, FormatRate(read_bytes, run.read_seconds),
      run.shard_seconds, total_seconds, "rank", "file", "tensors", "bytes");
  for (int rank = 0; rank < world; ++rank) {
    absl::StrAppendFormat(&out, "  %-4d  %-22s  %7d  %12d\n", rank, RankFileName(rank),
                          tensors[static_cast<size_t>(rank)], bytes[static_cast<size_t>(rank)]);
  }
  return out;
}

}  // namespace

absl::Status ShardCheckpoint(const ShardCheckpointOptions& options, Communicator& comm,
                             std::ostream& log) {
  const absl::Time start = absl::Now();
  Run run{options, comm, log};
  // One deadline for the whole run; every collective step below gets what is left of it.
  CallOptions call = options.call;
  call.deadline = comm.Deadline(options.call);
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, LoadInputs(run), "checking inputs", call));
  SHARDKIT_ASSIGN_OR_RETURN(std::string header_bytes, ShareHeader(run, call));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, ResolveParameters(run, header_bytes),
                                         "applying the plan to the checkpoint", call));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, ReadTensors(run), "reading the checkpoint", call));
  const absl::Time shard_start = absl::Now();
  SHARDKIT_RETURN_IF_ERROR(ShardModule(run.module, run.plan, comm, {}, ShardOptions{.call = call}));
  run.shard_seconds = absl::ToDoubleSeconds(absl::Now() - shard_start);
  SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, WriteRankFile(run), "writing shard files", call));
  if (!run.is_source()) return absl::OkStatus();
  const ShardIndex index = BuildIndex(run);
  SHARDKIT_RETURN_IF_ERROR(WriteIndex(options.out_dir, index));
  for (const std::string& warning : run.warnings) log << warning << "\n";
  log << Summary(run, index, absl::ToDoubleSeconds(absl::Now() - start)) << std::flush;
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
