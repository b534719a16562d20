#include "integration/checkpoint/source/hf_sharded_source.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/tensor/dtype.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "integration/formats/safetensors/sharding_info.h"
#include "specs/shard_metadata.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using safetensors::Reader;
using safetensors::TensorInfo;

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The *.safetensors files directly in `dir`, in name order.
std::vector<std::string> SafetensorsFiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (absl::EndsWith(name, ".safetensors") && it->is_regular_file(ec)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool IsRankFileName(const std::string& name) { return absl::StartsWith(name, "rank-"); }

// One file's DCP_SHARDING_INFO, every tensor of the file placed by it and nothing else.
absl::StatusOr<std::map<std::string, Shape>> Offsets(const Reader& file) {
  const auto it = file.header().metadata.find(safetensors::kDcpShardingInfoKey);
  if (it == file.header().metadata.end()) {
    return Invalid(file.path(), absl::StrCat("no __metadata__ ", safetensors::kDcpShardingInfoKey,
                                             " (every file of a sharded save has one)"));
  }
  using Offsets = std::map<std::string, Shape>;
  SHARDKIT_ASSIGN_OR_RETURN(Offsets offsets,
                            safetensors::ParseShardingInfo(it->second, file.path()));
  std::set<std::string> held;
  for (const TensorInfo& info : file.header().tensors) {
    held.insert(info.name);
    const auto at = offsets.find(info.name);
    if (at == offsets.end()) {
      return Invalid(file.path(), absl::StrCat("tensor ", QuoteName(info.name), " is not in ",
                                               safetensors::kDcpShardingInfoKey));
    }
    if (at->second.size() != info.shape.size()) {
      return Invalid(file.path(),
                     absl::StrCat("tensor ", QuoteName(info.name), " ", ShapeToString(info.shape),
                                  " has saved_offsets ", ShapeToString(at->second)));
    }
  }
  for (const auto& [name, at] : offsets) {
    if (!held.contains(name)) {
      return Invalid(file.path(), absl::StrCat(safetensors::kDcpShardingInfoKey, " places ",
                                               QuoteName(name), ", which the file does not hold"));
    }
  }
  return offsets;
}

// The whole tensor's shape: per dimension the largest offset + size of its pieces.
absl::StatusOr<Shape> WholeShape(const std::string& name,
                                 const std::vector<specs::ShardMetadata>& boxes) {
  Shape shape(boxes[0].sizes.size(), 0);
  for (const specs::ShardMetadata& box : boxes) {
    for (size_t d = 0; d < shape.size(); ++d) {
      if (box.offsets[d] > std::numeric_limits<int64_t>::max() - box.sizes[d]) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", QuoteName(name), ": offset ",
                                                       box.offsets[d], " + size ", box.sizes[d],
                                                       " overflows in dimension ", d));
      }
      shape[d] = std::max(shape[d], box.offsets[d] + box.sizes[d]);
    }
  }
  return shape;
}

}  // namespace

bool HfShardedSource::Holds(const std::string& dir) {
  const std::vector<std::string> names = SafetensorsFiles(dir);
  if (names.empty() || std::any_of(names.begin(), names.end(), IsRankFileName)) return false;
  std::set<std::string> seen;
  bool piece = false;
  for (const std::string& name : names) {
    absl::StatusOr<Reader> file = Reader::Open((fs::path(dir) / name).string());
    if (!file.ok()) return false;
    absl::StatusOr<std::map<std::string, Shape>> offsets = Offsets(*file);
    if (!offsets.ok()) return false;
    for (const auto& [tensor, at] : *offsets) {
      piece = piece || !seen.insert(tensor).second ||
              std::any_of(at.begin(), at.end(), [](int64_t o) { return o != 0; });
    }
  }
  return piece;
}

absl::StatusOr<std::unique_ptr<HfShardedSource>> HfShardedSource::Open(const std::string& dir,
                                                                       int64_t staging_bytes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  std::unique_ptr<HfShardedSource> source(new HfShardedSource());
  for (const std::string& name : SafetensorsFiles(dir)) {
    SHARDKIT_ASSIGN_OR_RETURN(Reader file, Reader::Open((fs::path(dir) / name).string()));
    source->identity_.push_back({name, file.identity().size, file.identity().header_digest});
    source->files_.push_back(std::move(file));
  }
  if (source->files_.empty()) return Invalid(dir, "holds no *.safetensors file");
  SHARDKIT_RETURN_IF_ERROR(source->IndexTensors(dir));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> staging,
                            AllocateBuffers(1, staging_bytes));
  source->staging_ = std::move(staging[0]);
  source->reader_ = std::make_unique<TensorBytesReader>(
      std::span<std::byte>(source->staging_->data(), source->staging_->nbytes()));
  source->touched_.assign(source->files_.size(), false);
  return source;
}

// Every name's pieces gathered from the files, checked to tile the whole tensor, and indexed by
// box; the metadata the files agree on.
absl::Status HfShardedSource::IndexTensors(const std::string& dir) {
  struct Found {
    std::vector<specs::ShardMetadata> boxes;
    std::vector<Piece> pieces;
  };
  std::map<std::string, Found> by_name;
  std::set<std::string> disagreeing;
  for (size_t f = 0; f < files_.size(); ++f) {
    absl::StatusOr<std::map<std::string, Shape>> placed = Offsets(files_[f]);
    if (!placed.ok()) return placed.status();
    const std::map<std::string, Shape>& offsets = *placed;
    for (const TensorInfo& info : files_[f].header().tensors) {
      Found& found = by_name[info.name];
      found.boxes.push_back({offsets.at(info.name), info.shape, specs::Placement::ForRank(0)});
      found.pieces.push_back({f, &info});
    }
    for (const auto& [key, value] : files_[f].header().metadata) {
      if (absl::StartsWith(key, "DCP_")) continue;  // the save's own bookkeeping
      auto [it, fresh] = header_.metadata.emplace(key, value);
      if (!fresh && it->second != value) disagreeing.insert(key);
    }
  }
  for (const std::string& key : disagreeing) header_.metadata.erase(key);
  uint64_t offset = 0;
  for (auto& [name, found] : by_name) {
    const TensorInfo& first = *found.pieces[0].info;
    for (const Piece& piece : found.pieces) {
      if (piece.info->dtype != first.dtype || piece.info->shape.size() != first.shape.size()) {
        return Invalid(
            dir, absl::StrCat("tensor ", QuoteName(name), " is ",
                              std::string(SafetensorsName(first.dtype)), ShapeToString(first.shape),
                              " in ", files_[found.pieces[0].file].path(), " but ",
                              std::string(SafetensorsName(piece.info->dtype)),
                              ShapeToString(piece.info->shape), " in ", files_[piece.file].path()));
      }
    }
    SHARDKIT_ASSIGN_OR_RETURN(const Shape shape, WholeShape(name, found.boxes));
    SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize size, ComputeShapeSize(shape, first.dtype));
    if (absl::Status tiled = specs::ValidateTiling(found.boxes, shape); !tiled.ok()) {
      return Invalid(dir, absl::StrCat("tensor ", QuoteName(name), " ", ShapeToString(shape),
                                       ": its pieces in the files (in name order) do not tile it: ",
                                       tiled.message()));
    }
    const uint64_t begin = offset;
    offset += static_cast<uint64_t>(size.nbytes);
    header_.tensors.push_back({name, first.dtype, shape, begin, offset});
    Tensor& tensor = tensors_.emplace_back();
    std::set<size_t> files;
    for (const Piece& piece : found.pieces) files.insert(piece.file);
    tensor.files.assign(files.begin(), files.end());
    tensor.pieces = std::move(found.pieces);
    SHARDKIT_ASSIGN_OR_RETURN(tensor.stored, MakeStoredTensor(name, first.dtype, shape, begin,
                                                              offset, std::move(found.boxes)));
  }
  return absl::OkStatus();
}

absl::Status HfShardedSource::ReadBytes(size_t t, int64_t offset, int64_t size,
                                        std::byte* dst) const {
  const Tensor& tensor = tensors_[t];
  return ReadFromBoxes(tensor.stored, offset, size, dst, *reader_, [&](size_t p, int64_t limit) {
    const Piece& piece = tensor.pieces[p];
    touched_[piece.file] = true;
    reader_->Reset(files_[piece.file], *piece.info, limit);
  });
}

absl::Status HfShardedSource::CheckUnchanged(size_t t) const {
  for (size_t f : tensors_[t].files) SHARDKIT_RETURN_IF_ERROR(files_[f].CheckUnchanged());
  return absl::OkStatus();
}

std::optional<TensorSource::FileReads> HfShardedSource::file_reads() const {
  return FileReads{static_cast<int64_t>(std::count(touched_.begin(), touched_.end(), true)),
                   reader_->bytes_read()};
}

}  // namespace shardkit::checkpoint
