#include "integration/formats/dcp/dcp_rank_file.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/formats/dcp/dcp_files.h"
#include "integration/formats/torch_zip/torch_zip_writer.h"

namespace shardkit::dcp {
namespace {

// One archive of a rank's file: shard `shard` of tensor `tensor` (-1: the whole tensor), at
// [offset, offset + archive.size()) of the file.
struct Item {
  size_t tensor = 0;
  int64_t shard = -1;
  uint64_t offset = 0;
};

bool Empty(const Shape& sizes) {
  return std::any_of(sizes.begin(), sizes.end(), [](int64_t n) { return n == 0; });
}

// Whether a tensor is written whole by the source: replicated, or with no elements.
bool Whole(const formats::OutputTensor& tensor) { return tensor.replicated || Empty(tensor.shape); }

// Calls `fn(t, s, sizes)` for every box of `tensors` that rank `rank`'s file holds, in file order:
// shard s of tensor t, or (s = -1) a tensor the source writes whole.
absl::Status ForEachBox(const formats::OutputTensors& tensors, int rank, int src_rank,
                        absl::FunctionRef<absl::Status(size_t, int64_t, const Shape&)> fn) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    const formats::OutputTensor& tensor = tensors[t];
    if (Whole(tensor)) {
      if (rank == src_rank) SHARDKIT_RETURN_IF_ERROR(fn(t, -1, tensor.shape));
      continue;
    }
    for (size_t s = 0; s < tensor.shards.size(); ++s) {
      const specs::ShardMetadata& shard = tensor.shards[s];
      if (shard.placement.rank() != rank || Empty(shard.sizes)) continue;
      SHARDKIT_RETURN_IF_ERROR(fn(t, static_cast<int64_t>(s), shard.sizes));
    }
  }
  return absl::OkStatus();
}

// Calls `fn` for every archive of rank `rank`'s file, in file order.
absl::Status ForEachItem(const formats::OutputTensors& tensors, int rank, int src_rank,
                         absl::FunctionRef<void(const Item&, const torch_zip::TensorArchive&)> fn) {
  uint64_t offset = 0;
  return ForEachBox(
      tensors, rank, src_rank, [&](size_t t, int64_t s, const Shape& sizes) -> absl::Status {
        absl::StatusOr<torch_zip::TensorArchive> archive =
            torch_zip::MakeTensorArchive(tensors[t].dtype, sizes);
        if (!archive.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("parameter \"", tensors[t].name, "\": ", archive.status().message()));
        }
        fn(Item{t, s, offset}, *archive);
        offset += archive->size();
        return absl::OkStatus();
      });
}

}  // namespace

absl::Status CreateDcpRankFile(const std::string& dir, int rank, int src_rank,
                               const formats::OutputTensors& tensors,
                               const formats::OutputItems& items, formats::RankFile& out) {
  const std::string path = (std::filesystem::path(dir) / DistcpFileName(rank)).string();
  out.dest.assign(tensors.size(), {});
  for (size_t t = 0; t < tensors.size(); ++t) {
    out.dest[t].assign(std::max<size_t>(tensors[t].shards.size(), 1), -1);
  }
  SHARDKIT_ASSIGN_OR_RETURN(os::AtomicFile file, os::AtomicFile::Create(path));
  uint64_t end = 0;
  absl::Status written;
  SHARDKIT_RETURN_IF_ERROR(ForEachItem(
      tensors, rank, src_rank, [&](const Item& item, const torch_zip::TensorArchive& archive) {
        const uint64_t values = item.offset + archive.prefix.size();
        out.dest[item.tensor][static_cast<size_t>(std::max<int64_t>(item.shard, 0))] =
            static_cast<int64_t>(values);
        if (written.ok()) {
          written = file.WriteAt(item.offset, archive.prefix.data(), archive.prefix.size());
        }
        if (written.ok()) {
          written = file.WriteAt(values + archive.data_length, archive.suffix.data(),
                                 archive.suffix.size());
        }
        end = item.offset + archive.size();
      }));
  SHARDKIT_RETURN_IF_ERROR(written);
  if (rank == src_rank) {
    for (const auto& [fqn, bytes] : items.bytes) {
      SHARDKIT_RETURN_IF_ERROR(file.WriteAt(end, bytes.data(), bytes.size()));
      end += bytes.size();
    }
  }
  SHARDKIT_RETURN_IF_ERROR(file.Resize(end));
  out.sink = std::make_unique<formats::FileSink>(std::move(file));
  out.data_start = 0;
  return absl::OkStatus();
}

int64_t DcpFileTensors(const formats::OutputTensors& tensors, int rank, int src_rank) {
  int64_t count = 0;
  (void)ForEachBox(tensors, rank, src_rank, [&](size_t, int64_t, const Shape&) {
    ++count;
    return absl::OkStatus();
  });
  return count;
}

absl::StatusOr<Metadata> MakeDcpMetadata(const formats::OutputTensors& tensors, int world,
                                         int src_rank, const formats::OutputItems& items) {
  Metadata metadata;
  std::vector<TensorEntry> entries(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    entries[t] = {tensors[t].name, tensors[t].dtype, tensors[t].shape, {}};
  }
  uint64_t source_end = 0;  // where the source's archives end: its items follow
  for (int rank = 0; rank < world; ++rank) {
    const std::string file = DistcpFileName(rank);
    SHARDKIT_RETURN_IF_ERROR(ForEachItem(
        tensors, rank, src_rank, [&](const Item& item, const torch_zip::TensorArchive& archive) {
          if (rank == src_rank) source_end = item.offset + archive.size();
          const formats::OutputTensor& tensor = tensors[item.tensor];
          Chunk chunk{
              Shape(tensor.shape.size(), 0), tensor.shape, {file, item.offset, archive.size()}};
          if (item.shard >= 0) {
            const specs::ShardMetadata& shard = tensor.shards[static_cast<size_t>(item.shard)];
            chunk.offsets = shard.offsets;
            chunk.sizes = shard.sizes;
          }
          entries[item.tensor].chunks.push_back(std::move(chunk));
        }));
  }
  std::sort(entries.begin(), entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.fqn < b.fqn; });
  metadata.tensors = std::move(entries);
  for (const auto& [fqn, bytes] : items.bytes) {
    metadata.bytes.push_back({fqn, {DistcpFileName(src_rank), source_end, bytes.size()}});
    source_end += bytes.size();
  }
  metadata.planner_data = items.paths;
  metadata.version = "1.0.0";
  return metadata;
}

}  // namespace shardkit::dcp
