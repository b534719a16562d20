#include "integration/checkpoint/save_shards.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/shard_parameter.h"
#include "core/os/files.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"
#include "integration/formats/output_file/output_directory.h"
#include "integration/formats/output_file/output_writer.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

// Everything one rank knows about the call, filled in step by step.
struct Save {
  const std::string& dir;
  const Module& module;
  Communicator& comm;
  const SaveShardsOptions& options;
  CallOptions call;     // one deadline for the whole call
  std::string context;  // "SaveShards(DIR)"
  Module meta;          // global shapes and dtypes
  std::vector<AgreedParameter> agreed;
  std::optional<OutputDirectory> out;           // rank 0 holds its lock
  std::string place;                            // rank 0's OutputDirectory::place()
  std::map<std::string, std::string> metadata;  // rank 0's, on every rank
  std::vector<StreamTensor> tensors;            // the agreed layouts, module order
  formats::OutputItems items;                   // rank 0: options.items
  StreamOutput output;                          // this rank's file, until committed

  const formats::OutputWriter& writer() const { return OutputWriterOf(options.format); }
  // What the ranks write, for the output format.
  formats::OutputContent Content() const {
    return {.world_size = comm.world_size(),
            .src_rank = 0,
            .tensors = tensors,
            .written_by = WrittenByName(WrittenBy::kSave),
            .metadata = &metadata,
            .items = &items};
  }

  absl::Status Agree(const absl::Status& local, std::string_view step) {
    return AgreeOnStatus(comm, local, absl::StrCat(context, ": ", std::string(step)), call);
  }
};

absl::Status CheckData(const Tensor& tensor, const std::string& what) {
  if (tensor.is_meta()) return absl::InvalidArgumentError(absl::StrCat(what, " has no data"));
  if (!tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is on ", tensor.device().ToString(),
                                                   " (SaveShards writes host memory)"));
  }
  return absl::OkStatus();
}

// Step 1 (local): non-tensor items only where the format holds them, under names of their own.
absl::Status CheckItems(const Save& save) {
  if (save.options.items.empty()) return absl::OkStatus();
  if (!save.writer().holds_items()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SaveShardsOptions::items: ", std::string(save.writer().description()),
        " has no place for non-tensor items (", QuoteName(save.options.items.begin()->first),
        ", ...): save with format kDcp"));
  }
  for (const auto& [key, bytes] : save.options.items) {
    if (save.module.Contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("SaveShardsOptions::items: ", QuoteName(key),
                                                     " is also a parameter of the module"));
    }
  }
  return absl::OkStatus();
}

// Step 1 (local): every slot has its data in host memory and a name the format allows.
absl::Status CheckSlots(Save& save) {
  SHARDKIT_RETURN_IF_ERROR(CheckItems(save));
  SHARDKIT_ASSIGN_OR_RETURN(save.meta, GlobalMetaModule(save.module, save.options.memory_bytes));
  for (const std::string& name : save.module.names()) {
    SHARDKIT_RETURN_IF_ERROR(CheckNoShardSuffix(name));
    const std::string what = absl::StrCat("parameter ", QuoteName(name));
    if (!*save.module.IsSharded(name)) {
      SHARDKIT_RETURN_IF_ERROR(CheckData(**save.module.GetTensor(name), what));
      continue;
    }
    for (const LocalShard& shard : (*save.module.GetSharded(name))->local_shards()) {
      SHARDKIT_RETURN_IF_ERROR(CheckData(shard.tensor, absl::StrCat(what, " shard ", shard.index)));
    }
  }
  return absl::OkStatus();
}

// Step 1: the engine's agreement on names, global shapes, dtypes, requires_grad and bound specs
// (a plain Tensor: replicated). Collective; errors identical on every rank.
absl::Status AgreeOnModule(Save& save) {
  std::vector<ParameterSpec> parameters;
  for (const std::string& name : save.module.names()) {
    std::optional<specs::ShardingSpec> spec;
    if (*save.module.IsSharded(name)) spec = (*save.module.GetSharded(name))->spec();
    parameters.push_back({name, std::move(spec)});
  }
  // Nothing is sent: every rank writes the shards it holds (layouts only, as LoadShards agrees).
  ShardOptions options{.src_rank = 0, .strategy = specs::Strategy::kDirect, .call = save.call};
  absl::StatusOr<std::vector<AgreedParameter>> agreed =
      AgreeOnParameters(save.meta, parameters, save.comm, options);
  if (!agreed.ok()) return Annotate(agreed.status(), save.context);
  save.agreed = *std::move(agreed);
  return absl::OkStatus();
}

// Step 2 (local): each ShardedTensor's shards are its agreed spec's layout (what index.json will
// list); DIR is ready for a new output.
absl::Status CheckLayoutsAndDir(Save& save) {
  for (const AgreedParameter& parameter : save.agreed) {
    if (!parameter.spec) continue;
    const ShardedTensor& tensor = **save.module.GetSharded(parameter.name);
    const bool same = std::equal(tensor.shards().begin(), tensor.shards().end(),
                                 parameter.shards.begin(), parameter.shards.end(),
                                 [](const specs::ShardMetadata& a, const specs::ShardMetadata& b) {
                                   return a.offsets == b.offsets && a.sizes == b.sizes &&
                                          a.placement.rank() == b.placement.rank();
                                 });
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", QuoteName(parameter.name), ": its shards are not the layout of its spec ",
          parameter.spec_json, " over this communicator's ", save.comm.world_size(), " ranks"));
    }
  }
  SHARDKIT_ASSIGN_OR_RETURN(save.out,
                            PrepareOutput(save.dir, save.options.format, save.comm.rank() == 0));
  return absl::OkStatus();
}

// Step 2 (rank 0): the lock, held until the call returns; where the files go: DIR, or beside a
// complete earlier output, which stays until the commit (output_directory.h).
absl::Status LockAndChoose(Save& save) {
  if (save.comm.rank() != 0) return absl::OkStatus();
  return save.out->Begin();
}

// Every rank's format (the first line it sent): all the same, or an error naming which ranks were
// given which, formats in name order (the same bytes, so the same verdict, on every rank).
absl::Status CheckSameFormat(const std::vector<std::string>& all) {
  std::map<std::string, std::vector<std::string>> ranks_of;
  for (size_t r = 0; r < all.size(); ++r) {
    ranks_of[all[r].substr(0, all[r].find('\n'))].push_back(absl::StrCat(r));
  }
  if (ranks_of.size() == 1) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& [format, ranks] : ranks_of) {
    parts.push_back(absl::StrCat(format, " on ranks ", absl::StrJoin(ranks, ", ")));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the ranks were given different formats: ", absl::StrJoin(parts, ", ")));
}

// Step 2: every rank's format, and rank 0's place (OutputDirectory::place) and metadata, reach
// every rank, for the rank files' __metadata__ (collective; the same bytes, so the same result,
// on every rank).
absl::Status ShareMetadata(Save& save) {
  std::string mine = std::string(save.writer().format_name()) + "\n";
  if (save.comm.rank() == 0) {
    absl::StrAppend(&mine, save.out->place(), "\n",
                    safetensors::SerializeHeader({}, save.options.metadata));
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            save.comm.AllGather(ConstBuffer(mine), save.call));
  SHARDKIT_RETURN_IF_ERROR(Annotate(CheckSameFormat(all), save.context));
  const size_t format_end = all[0].find('\n');
  const size_t newline = all[0].find('\n', format_end + 1);
  save.place = all[0].substr(format_end + 1, newline - format_end - 1);
  SHARDKIT_ASSIGN_OR_RETURN(
      safetensors::Header header,
      safetensors::ParseHeader(all[0].substr(newline + 1), 0, "metadata from rank 0"));
  save.metadata = std::move(header.metadata);
  return absl::OkStatus();
}

// Step 3 (local): this rank's file created at its final size.
absl::Status CreateOwnFile(Save& save) {
  if (save.comm.rank() != 0) SHARDKIT_RETURN_IF_ERROR(save.out->Follow(save.place));
  if (save.comm.rank() == 0) save.items.bytes = save.options.items;
  for (AgreedParameter& parameter : save.agreed) {
    StreamTensor& tensor = save.tensors.emplace_back();
    tensor.name = parameter.name;
    tensor.dtype = parameter.dtype;
    tensor.shape = parameter.shape;
    tensor.replicated = !parameter.spec.has_value();
    tensor.shards = parameter.shards;
    tensor.spec_json = parameter.spec_json;
  }
  return save.writer().CreateRankFile(save.out->write_dir(), save.comm.rank(), save.Content(),
                                      save.output);
}

// `tensor`'s bytes, row-major, written at file offset `at`: straight from its memory when it is
// contiguous, else through contiguous copies of at most `budget` bytes — pieces along its first
// dimension longer than 1 (a piece of one index along it is cut along the next such dimension).
absl::Status WriteTensor(formats::RankSink& file, uint64_t at, const Tensor& tensor,
                         int64_t budget) {
  if (tensor.nbytes() == 0) return absl::OkStatus();
  if (tensor.IsContiguous() || tensor.nbytes() <= budget) {
    SHARDKIT_ASSIGN_OR_RETURN(const Tensor bytes, tensor.Contiguous());
    SHARDKIT_RETURN_IF_ERROR(file.WriteAt(at, bytes.data(), static_cast<size_t>(bytes.nbytes())));
    file.StartWriteback(at, static_cast<uint64_t>(bytes.nbytes()));
    return absl::OkStatus();
  }
  // Not contiguous, so some dimension is longer than 1; the ones before it are of size 1.
  const auto dim = static_cast<int64_t>(
      std::find_if(tensor.shape().begin(), tensor.shape().end(), [](int64_t n) { return n > 1; }) -
      tensor.shape().begin());
  const int64_t size = tensor.shape()[static_cast<size_t>(dim)];
  const int64_t slice_bytes = tensor.nbytes() / size;
  const int64_t step = std::max<int64_t>(1, budget / slice_bytes);
  for (int64_t i = 0; i < size; i += step) {
    SHARDKIT_ASSIGN_OR_RETURN(const Tensor piece, tensor.Narrow(dim, i, std::min(step, size - i)));
    SHARDKIT_RETURN_IF_ERROR(
        WriteTensor(file, at + static_cast<uint64_t>(i * slice_bytes), piece, budget));
  }
  return absl::OkStatus();
}

// Step 3 (local): every tensor this rank holds, at its place in its file; then the file durable
// under its final name.
absl::Status WriteAndCommit(Save& save) {
  // dest -1: not in this rank's file (--format dcp: a replicated tensor off rank 0, a zero-size
  // shard).
  const auto write = [&](size_t t, size_t s, const Tensor& tensor) -> absl::Status {
    const int64_t dest = save.output.dest[t][s];
    if (dest < 0) return absl::OkStatus();
    return WriteTensor(*save.output.sink, static_cast<uint64_t>(save.output.data_start + dest),
                       tensor, save.options.memory_bytes);
  };
  for (size_t t = 0; t < save.tensors.size(); ++t) {
    const std::string& name = save.tensors[t].name;
    if (save.tensors[t].replicated) {
      SHARDKIT_RETURN_IF_ERROR(write(t, 0, **save.module.GetTensor(name)));
      continue;
    }
    for (const LocalShard& shard : (*save.module.GetSharded(name))->local_shards()) {
      SHARDKIT_RETURN_IF_ERROR(write(t, shard.index, shard.tensor));
    }
  }
  absl::Status status = save.output.sink->Commit();
  save.output.sink.reset();
  return status;
}

// Step 4 (rank 0): the format's last file (index.json, `.metadata`), then the commit
// (OutputDirectory::Commit).
absl::Status WriteSavedIndex(Save& save) {
  if (save.comm.rank() != 0) return absl::OkStatus();
  SHARDKIT_RETURN_IF_ERROR(save.writer().WriteLastFile(save.out->write_dir(), save.Content()));
  return save.out->Commit();
}

// The steps of save_shards.h, in order.
absl::Status RunSteps(Save& save) {
  SHARDKIT_RETURN_IF_ERROR(save.Agree(CheckSlots(save), "checking the module"));
  SHARDKIT_RETURN_IF_ERROR(AgreeOnModule(save));
  SHARDKIT_RETURN_IF_ERROR(save.Agree(CheckLayoutsAndDir(save), "preparing the directory"));
  SHARDKIT_RETURN_IF_ERROR(save.Agree(LockAndChoose(save), "locking the directory"));
  SHARDKIT_RETURN_IF_ERROR(ShareMetadata(save));
  SHARDKIT_RETURN_IF_ERROR(save.Agree(CreateOwnFile(save), "creating shard files"));
  SHARDKIT_RETURN_IF_ERROR(save.Agree(WriteAndCommit(save), "writing shard files"));
  return save.Agree(WriteSavedIndex(save),
                    "writing " + std::string(save.writer().last_file_name()));
}

}  // namespace

absl::StatusOr<Module> GlobalMetaModule(const Module& module, int64_t memory_bytes) {
  if (memory_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("memory_bytes must be > 0, got ", memory_bytes));
  }
  Module meta;
  for (const std::string& name : module.names()) {
    absl::StatusOr<Tensor> tensor;
    bool requires_grad = false;
    if (*module.IsSharded(name)) {
      const ShardedTensor& sharded = **module.GetSharded(name);
      tensor = Tensor::Meta(sharded.global_shape(), sharded.dtype());
      requires_grad = sharded.requires_grad();
    } else {
      const Tensor& plain = **module.GetTensor(name);
      tensor = Tensor::Meta(plain.shape(), plain.dtype());
      requires_grad = plain.requires_grad();
    }
    if (!tensor.ok()) return Annotate(tensor.status(), absl::StrCat("parameter ", QuoteName(name)));
    tensor->set_requires_grad(requires_grad);
    SHARDKIT_RETURN_IF_ERROR(meta.AddParameter(name, *std::move(tensor)));
  }
  return meta;
}

absl::Status SaveShards(const std::string& dir, const Module& module, Communicator& comm,
                        const SaveShardsOptions& options) {
  Save save{dir, module, comm, options};
  save.call = options.call;
  save.call.deadline = comm.Deadline(options.call);
  save.context = absl::StrCat("SaveShards(", dir, ")");
  absl::Status status = RunSteps(save);
  if (!status.ok()) {
    save.output.sink.reset();
    if (save.out) save.out->Abandon();
  }
  return status;
}

}  // namespace shardkit::checkpoint
