#include "integration/checkpoint/gather_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/byte_runs.h"
#include "integration/checkpoint/progress.h"
#include "integration/checkpoint/shard_dir.h"
#include "integration/checkpoint/slot_pipe.h"
#include "integration/checkpoint/stream_buffer.h"
#include "integration/checkpoint/stream_schedule.h"
#include "integration/checkpoint/stream_shard.h"
#include "integration/checkpoint/tensor_bytes_reader.h"
#include "integration/io/files.h"
#include "integration/io/proc_status.h"
#include "integration/safetensors/safetensors.h"

namespace shardkit::checkpoint {
namespace {

using safetensors::Reader;
using safetensors::TensorInfo;

absl::StatusOr<std::vector<Reader>> OpenRankFiles(const std::string& dir, const ShardIndex& index) {
  std::vector<Reader> readers;
  for (int64_t rank = 0; rank < index.world_size; ++rank) {
    SHARDKIT_ASSIGN_OR_RETURN(
        Reader reader, Reader::Open((std::filesystem::path(dir) / RankFileName(rank)).string()));
    readers.push_back(std::move(reader));
  }
  return readers;
}

absl::StatusOr<const TensorInfo*> FindShard(const std::vector<Reader>& readers,
                                            const IndexParameter& parameter, size_t i) {
  const IndexShard& shard = parameter.shards[i];
  const Reader& reader = readers[static_cast<size_t>(shard.metadata.placement.rank())];
  SHARDKIT_ASSIGN_OR_RETURN(const TensorInfo* info, reader.Find(shard.tensor));
  if (info->dtype != parameter.dtype || info->shape != shard.metadata.sizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": tensor \"", shard.tensor, "\" is ",
        std::string(SafetensorsName(info->dtype)), ShapeToString(info->shape),
        " but index.json says shard ", i, " of parameter \"", parameter.name, "\" is ",
        std::string(SafetensorsName(parameter.dtype)), ShapeToString(shard.metadata.sizes)));
  }
  return info;
}

// Every listed shard is present with the right dtype and shape; nothing else is in the files.
absl::Status VerifyShards(const std::vector<Reader>& readers, const ShardIndex& index) {
  std::vector<std::set<std::string>> listed(readers.size());
  for (const IndexParameter& parameter : index.parameters) {
    for (size_t i = 0; i < parameter.shards.size(); ++i) {
      SHARDKIT_RETURN_IF_ERROR(FindShard(readers, parameter, i).status());
      const IndexShard& shard = parameter.shards[i];
      listed[static_cast<size_t>(shard.metadata.placement.rank())].insert(shard.tensor);
    }
  }
  for (size_t rank = 0; rank < readers.size(); ++rank) {
    for (const TensorInfo& info : readers[rank].header().tensors) {
      if (!listed[rank].contains(info.name)) {
        return absl::InvalidArgumentError(absl::StrCat(readers[rank].path(), ": tensor \"",
                                                       info.name, "\" is not listed in ",
                                                       kIndexFileName));
      }
    }
  }
  return absl::OkStatus();
}

// The output's tensors (name order, as index.json lists them) with their layouts and offsets.
absl::StatusOr<std::vector<StreamTensor>> OutputTensors(const ShardIndex& index,
                                                        const std::vector<TensorInfo>& placed) {
  std::vector<StreamTensor> tensors;
  for (size_t i = 0; i < index.parameters.size(); ++i) {
    const IndexParameter& parameter = index.parameters[i];
    std::vector<specs::ShardMetadata> shards;
    for (const IndexShard& shard : parameter.shards) shards.push_back(shard.metadata);
    SHARDKIT_ASSIGN_OR_RETURN(
        tensors.emplace_back(),
        MakeStreamTensor(parameter.name, parameter.dtype, parameter.shape, placed[i].begin,
                         placed[i].end, !parameter.spec.has_value(), std::move(shards)));
  }
  return tensors;
}

// Where each shard of each parameter is: infos[p][s] in readers[its rank] (nullptr for the copies
// of a replicated parameter other than the source rank's, which are not read).
using ShardInfos = std::vector<std::vector<const TensorInfo*>>;

absl::StatusOr<ShardInfos> FindShards(const std::vector<Reader>& readers, const ShardIndex& index) {
  ShardInfos infos;
  for (const IndexParameter& parameter : index.parameters) {
    std::vector<const TensorInfo*>& mine = infos.emplace_back();
    for (size_t s = 0; s < parameter.shards.size(); ++s) {
      if (!parameter.spec && parameter.shards[s].metadata.placement.rank() != index.src_rank) {
        mine.push_back(nullptr);
        continue;
      }
      SHARDKIT_ASSIGN_OR_RETURN(mine.emplace_back(), FindShard(readers, parameter, s));
    }
  }
  return infos;
}

// Fills `window` with output bytes [begin, end): every tensor's part of it, from its shards
// (replicated tensors: the source rank's copy), each shard's needed bytes read in one pass.
absl::Status FillOutput(const std::vector<Reader>& readers, const ShardIndex& index,
                        const ShardInfos& infos, const std::vector<StreamTensor>& tensors,
                        uint64_t begin, uint64_t end, TensorBytesReader& bytes, std::byte* window) {
  auto first = std::partition_point(tensors.begin(), tensors.end(),
                                    [&](const StreamTensor& t) { return t.end <= begin; });
  for (auto t = first; t != tensors.end() && t->begin < end; ++t) {
    const IndexParameter& parameter = index.parameters[static_cast<size_t>(t - tensors.begin())];
    const auto from = static_cast<int64_t>(std::max(begin, t->begin) - t->begin);
    const auto to = static_cast<int64_t>(std::min(end, t->end) - t->begin);
    // Window position of the tensor's byte x: shift + x (the tensor may start before the window).
    const int64_t shift = static_cast<int64_t>(t->begin) - static_cast<int64_t>(begin);
    for (size_t s = 0; s < parameter.shards.size(); ++s) {
      const TensorInfo* info = infos[static_cast<size_t>(t - tensors.begin())][s];
      if (info == nullptr) continue;
      const Reader& file =
          readers[static_cast<size_t>(parameter.shards[s].metadata.placement.rank())];
      if (t->replicated) {
        bytes.Reset(file, *info, to);
        SHARDKIT_RETURN_IF_ERROR(bytes.Copy(from, to - from, window + (shift + from)));
        continue;
      }
      const auto [first, count] = ShardSpan(t->runs[s], from, to);
      bytes.Reset(file, *info, first + count);  // staged reads stop where this window's end
      absl::Status status;
      ForEachPiece(t->runs[s], from, to, [&](int64_t tensor_at, int64_t shard_at, int64_t n) {
        if (status.ok()) status = bytes.Copy(shard_at, n, window + (shift + tensor_at));
      });
      SHARDKIT_RETURN_IF_ERROR(status);
    }
  }
  return absl::OkStatus();
}

// The output's data region, window by window: this thread fills one window while a writer thread
// writes the other at its offset.
absl::Status WriteOutput(const std::vector<Reader>& readers, const ShardIndex& index,
                         const ShardInfos& infos, const std::vector<StreamTensor>& tensors,
                         int64_t total, int64_t data_start, io::AtomicFile& file,
                         int64_t memory_bytes, Progress& meter) {
  const Budget budget = SplitBudget(memory_bytes);
  const int64_t window = std::max<int64_t>(std::min(budget.window, total), 1);
  const int64_t rounds = (total + window - 1) / window;
  const auto slots = static_cast<size_t>(std::min<int64_t>(2, rounds));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> windows,
                            AllocateBuffers(slots, window));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> staging,
                            AllocateBuffers(1, budget.staging));
  TensorBytesReader bytes(std::span<std::byte>(staging[0]->data(), staging[0]->nbytes()));
  SlotPipe pipe(std::max<size_t>(slots, 1));
  absl::Status write_status;
  std::thread writer([&] {
    for (int64_t k = 0; k < rounds; ++k) {
      std::optional<SlotPipe::Filled> filled = pipe.WaitFilled();
      if (!filled) return;
      const int64_t begin = k * window, size = std::min(window, total - begin);
      write_status = file.WriteAt(static_cast<uint64_t>(data_start + begin),
                                  windows[filled->slot]->data(), static_cast<size_t>(size));
      file.StartWriteback(static_cast<uint64_t>(data_start + begin), static_cast<uint64_t>(size));
      pipe.Release(filled->slot);
      if (!write_status.ok()) {
        pipe.Close();  // wakes the filling thread, which stops
        return;
      }
    }
  });
  absl::Status status;
  for (int64_t k = 0; k < rounds && status.ok(); ++k) {
    std::optional<size_t> slot = pipe.AcquireFree();
    if (!slot) break;  // the writer failed
    const auto begin = static_cast<uint64_t>(k * window);
    const auto end = static_cast<uint64_t>(std::min(total, (k + 1) * window));
    status = FillOutput(readers, index, infos, tensors, begin, end, bytes, windows[*slot]->data());
    if (!status.ok()) break;  // nothing half-filled is written
    pipe.Publish(*slot, absl::OkStatus());
    meter.Step(k + 1, static_cast<int64_t>(end));
  }
  if (!status.ok()) pipe.Close();
  writer.join();
  return status.ok() ? write_status : status;
}

}  // namespace

absl::Status GatherCheckpoint(const std::string& in_dir, const std::string& out_path,
                              std::ostream& log, const GatherOptions& options) {
  SHARDKIT_ASSIGN_OR_RETURN(ShardIndex index, ReadIndex(in_dir));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<Reader> readers, OpenRankFiles(in_dir, index));
  SHARDKIT_RETURN_IF_ERROR(VerifyShards(readers, index));
  std::vector<TensorInfo> infos;
  for (const IndexParameter& parameter : index.parameters) {
    infos.push_back({parameter.name, parameter.dtype, parameter.shape, 0, 0});
  }
  SHARDKIT_ASSIGN_OR_RETURN(safetensors::FileLayout layout,
                            safetensors::PlanFile(out_path, std::move(infos), index.metadata));
  // index.parameters and layout.tensors are both in name order.
  SHARDKIT_ASSIGN_OR_RETURN(const std::vector<StreamTensor> tensors,
                            OutputTensors(index, layout.tensors));
  const auto total = static_cast<int64_t>(layout.data_size);
  SHARDKIT_ASSIGN_OR_RETURN(io::AtomicFile file, io::AtomicFile::Create(out_path));
  SHARDKIT_RETURN_IF_ERROR(file.Write(layout.prefix.data(), layout.prefix.size()));
  SHARDKIT_RETURN_IF_ERROR(file.Resize(layout.prefix.size() + layout.data_size));
  const int64_t window = std::max<int64_t>(SplitBudget(options.memory_bytes).window, 1);
  Progress meter(log, options.progress, "shardkit gather: writing", (total + window - 1) / window,
                 total, "windows");
  SHARDKIT_ASSIGN_OR_RETURN(const ShardInfos shard_infos, FindShards(readers, index));
  SHARDKIT_RETURN_IF_ERROR(WriteOutput(readers, index, shard_infos, tensors, total,
                                       static_cast<int64_t>(layout.prefix.size()), file,
                                       options.memory_bytes, meter));
  SHARDKIT_RETURN_IF_ERROR(file.Commit());
  absl::StatusOr<int64_t> peak = io::ProcStatusBytes("VmHWM");
  log << absl::StrFormat(
             "shardkit gather: %d parameters (%s) from %d rank files to %s in %.3f s (%s), "
             "peak RSS %.1f MiB\n",
             index.parameters.size(), FormatBytes(total), index.world_size, out_path,
             meter.Elapsed(), FormatRate(total, meter.Elapsed()),
             peak.ok() ? static_cast<double>(*peak) / (1 << 20) : 0.0)
      << std::flush;
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
