// LoadShards (save_shards.h): a shard directory's (or a DCP checkpoint's) parameters into a
// Module, laid out by a plan.
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/engine/shard_parameter.h"
#include "core/tensor/dtype.h"
#include "integration/checkpoint/save_shards.h"
#include "integration/checkpoint/source/dcp_source.h"
#include "integration/checkpoint/source/saved_directory.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/stream_shard.h"
#include "integration/checkpoint/stream/tensor_bytes_reader.h"

namespace shardkit::checkpoint {
namespace {

// A parameter's new content on this rank, built before the commit.
using Loaded = std::variant<Tensor, ShardedTensor>;

// Everything one rank knows about the call, filled in step by step.
struct Load {
  const std::string& dir;
  Module& module;
  Communicator& comm;
  const LoadShardsOptions& options;
  CallOptions call;                            // one deadline for the whole call
  std::string context;                         // "LoadShards(DIR)"
  Module meta;                                 // global shapes and dtypes, module order
  SavedDirectory saved;                        // a shard directory or a DCP checkpoint
  std::map<std::string, size_t> source_index;  // parameter name -> source tensor
  std::vector<AgreedParameter> agreed;         // module order
  std::vector<Loaded> loaded;                  // as agreed
  std::map<std::string, std::string> items;  // a DCP checkpoint's non-tensor items (options.items)

  absl::Status Agree(const absl::Status& local, std::string_view step) {
    return AgreeOnStatus(comm, local, absl::StrCat(context, ": ", std::string(step)), call);
  }
};

std::string DescribeTensor(DType dtype, const Shape& shape) {
  return absl::StrCat(std::string(SafetensorsName(dtype)), ShapeToString(shape));
}

// Step 1 (local): the module's parameters are DIR's, with DIR's shapes and dtypes.
absl::Status MatchModule(Load& load) {
  const std::vector<safetensors::TensorInfo>& saved = load.saved.source->header().tensors;
  const std::string& index = load.saved.last_file;  // how messages name DIR's list
  for (size_t t = 0; t < saved.size(); ++t) load.source_index[saved[t].name] = t;
  for (const std::string& name : load.meta.names()) {
    const auto found = load.source_index.find(name);
    if (found == load.source_index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", QuoteName(name), " of the module is not in ", index));
    }
    const safetensors::TensorInfo& theirs = saved[found->second];
    const Tensor& mine = **load.meta.GetTensor(name);
    if (mine.dtype() != theirs.dtype || mine.shape() != theirs.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", QuoteName(name), " is ", DescribeTensor(mine.dtype(), mine.shape()),
          " in the module but ", DescribeTensor(theirs.dtype, theirs.shape), " in ", index));
    }
  }
  if (load.options.allow_unused) return absl::OkStatus();
  for (const safetensors::TensorInfo& theirs : saved) {
    if (!load.meta.Contains(theirs.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", QuoteName(theirs.name), " of ", index,
          " is not in the module (LoadShardsOptions::allow_unused skips such parameters)"));
    }
  }
  return absl::OkStatus();
}

// Step 1 (local): DIR opened and validated, the module checked against it.
absl::Status OpenAndMatch(Load& load) {
  SHARDKIT_ASSIGN_OR_RETURN(load.meta, GlobalMetaModule(load.module, load.options.memory_bytes));
  SHARDKIT_ASSIGN_OR_RETURN(
      load.saved, OpenSavedDirectory(load.dir, SplitBudget(load.options.memory_bytes, 2).staging));
  if (load.options.items != nullptr && load.saved.dcp_source != nullptr) {
    SHARDKIT_ASSIGN_OR_RETURN(
        load.items, load.saved.dcp_source->ReadItems([](const std::string&) { return true; }));
  }
  return MatchModule(load);
}

// Reads shard `s` of parameter `p` (tensor `t` of the source) into `dst`, piece by piece in
// increasing offset order: each piece a range of tensor bytes, read from the old shards that
// overlap it. Short pieces are read together only as the coalescing rule allows
// (TensorBytesReader::Want: gaps within 1.25 × the wanted bytes, or shorter than a page), so the
// reads touch only the old shards overlapping the new shard's pieces.
absl::Status ReadShard(const TensorSource& source, size_t t, const StreamTensor& p, size_t s,
                       TensorBytesReader& reader, std::byte* dst) {
  if (p.replicated) {
    reader.Reset(source, t);
    const safetensors::TensorInfo& info = source.header().tensors[t];
    return reader.Copy(0, static_cast<int64_t>(info.end - info.begin), dst);
  }
  const ByteRuns& runs = p.runs[s];
  const int64_t end = runs.Offset(runs.count - 1) + runs.length;
  reader.Reset(source, t, end);
  absl::Status status;
  ForEachPiece(runs, runs.base, end, [&](int64_t tensor_at, int64_t shard_at, int64_t n) {
    if (status.ok()) status = reader.Want(tensor_at, n, dst + shard_at);
  });
  if (!status.ok()) return status;  // a failed Want left nothing pending
  return reader.Flush();
}

// Placements must be host memory: LoadShards allocates its shards there.
absl::Status CheckHostPlacements(const AgreedParameter& parameter) {
  for (size_t s = 0; s < parameter.shards.size(); ++s) {
    const auto& device = parameter.shards[s].placement.device();
    if (device && !device->is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", QuoteName(parameter.name), ": shard ", s, " is placed on ",
                       parameter.shards[s].placement.ToString(),
                       "; LoadShards allocates shards in host memory (cpu)"));
    }
  }
  return absl::OkStatus();
}

// Step 2 (local): one parameter's new content on this rank, allocated and read.
absl::StatusOr<Loaded> LoadParameter(const Load& load, const AgreedParameter& parameter,
                                     TensorBytesReader& reader) {
  SHARDKIT_RETURN_IF_ERROR(CheckHostPlacements(parameter));
  const size_t t = load.source_index.at(parameter.name);
  const safetensors::TensorInfo& info = load.saved.source->header().tensors[t];
  SHARDKIT_ASSIGN_OR_RETURN(
      const StreamTensor p,
      MakeStreamTensor(parameter.name, parameter.dtype, parameter.shape, info.begin, info.end,
                       !parameter.spec.has_value(), parameter.shards));
  SHARDKIT_RETURN_IF_ERROR(load.saved.source->CheckUnchanged(t));
  const bool requires_grad = (*load.meta.GetTensor(parameter.name))->requires_grad();
  if (p.replicated) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor whole, Tensor::Empty(parameter.shape, parameter.dtype));
    SHARDKIT_RETURN_IF_ERROR(ReadShard(*load.saved.source, t, p, 0, reader, whole.data()));
    whole.set_requires_grad(requires_grad);
    return whole;
  }
  std::vector<LocalShard> local;
  for (size_t s = 0; s < p.shards.size(); ++s) {
    if (p.shards[s].placement.rank() != load.comm.rank()) continue;
    SHARDKIT_ASSIGN_OR_RETURN(Tensor shard, Tensor::Empty(p.shards[s].sizes, parameter.dtype));
    if (p.runs[s].count > 0) {
      SHARDKIT_RETURN_IF_ERROR(ReadShard(*load.saved.source, t, p, s, reader, shard.data()));
    }
    local.push_back({s, std::move(shard)});
  }
  return ShardedTensor::Create(parameter.shape, parameter.dtype, requires_grad, *parameter.spec,
                               parameter.shards, std::move(local), load.comm.rank());
}

// Step 2 (local): every parameter's new content, through one staging buffer of the budget's size
// (ShardDirSource holds the other).
absl::Status LoadAll(Load& load) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> staging,
                            AllocateBuffers(1, SplitBudget(load.options.memory_bytes, 2).staging));
  TensorBytesReader reader(std::span<std::byte>(staging[0]->data(), staging[0]->nbytes()));
  for (const AgreedParameter& parameter : load.agreed) {
    absl::StatusOr<Loaded> loaded = LoadParameter(load, parameter, reader);
    if (!loaded.ok()) {
      return Annotate(loaded.status(), absl::StrCat("parameter ", QuoteName(parameter.name)));
    }
    load.loaded.push_back(*std::move(loaded));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadShards(const std::string& dir, Module& module, const specs::Plan& plan,
                        Communicator& comm, const LoadShardsOptions& options) {
  Load load{dir, module, comm, options};
  load.call = options.call;
  load.call.deadline = comm.Deadline(options.call);
  load.context = absl::StrCat("LoadShards(", dir, ")");
  SHARDKIT_RETURN_IF_ERROR(load.Agree(OpenAndMatch(load), "opening the shard directory"));
  // The plan's src_rank and strategy say how a source's tensors are sent; here nothing is sent.
  absl::StatusOr<std::vector<AgreedParameter>> agreed =
      AgreeOnPlan(load.meta, plan, comm, {.src_rank = 0, .strategy = specs::Strategy::kDirect},
                  {.call = load.call});
  if (!agreed.ok()) return Annotate(agreed.status(), load.context);
  load.agreed = *std::move(agreed);
  SHARDKIT_RETURN_IF_ERROR(load.Agree(LoadAll(load), "reading shards"));
  if (options.items != nullptr) *options.items = std::move(load.items);
  for (size_t i = 0; i < load.agreed.size(); ++i) {  // committed: replace the slots
    const std::string& name = load.agreed[i].name;
    if (auto* sharded = std::get_if<ShardedTensor>(&load.loaded[i])) {
      SHARDKIT_RETURN_IF_ERROR(module.SetSharded(name, std::move(*sharded)));
    } else {
      SHARDKIT_RETURN_IF_ERROR(module.SetTensor(name, std::get<Tensor>(std::move(load.loaded[i]))));
    }
  }
  if (options.stats != nullptr) {
    const auto reads = load.saved.source->file_reads();
    options.stats->files_read = reads ? reads->files : 0;
    options.stats->bytes_read = reads ? reads->bytes : 0;
  }
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
