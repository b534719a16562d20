#include "integration/checkpoint/source/shard_dir_source.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "core/tensor/dtype.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "specs/fingerprint.h"

namespace shardkit::checkpoint {
using safetensors::Reader;
using safetensors::TensorInfo;

absl::StatusOr<std::unique_ptr<ShardDirSource>> ShardDirSource::Open(const std::string& dir,
                                                                     int64_t staging_bytes) {
  namespace fs = std::filesystem;
  const std::string index_path = (fs::path(dir) / kIndexFileName).string();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir,
                     ": not a shard directory (the input of reshard is a directory that "
                     "'shardkit shard' wrote; a checkpoint is sharded with 'shardkit shard')"));
  }
  if (!fs::exists(index_path, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", kIndexFileName,
                                            " (not a shard directory, or an unfinished one)"));
  }
  std::unique_ptr<ShardDirSource> source(new ShardDirSource());
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, os::ReadWholeFile(index_path));
  SHARDKIT_ASSIGN_OR_RETURN(source->index_, ParseIndex(text, index_path));
  source->identity_.push_back({kIndexFileName, text.size(), specs::Fingerprint(text), true});
  SHARDKIT_RETURN_IF_ERROR(source->OpenFiles(dir, staging_bytes));
  return source;
}

absl::StatusOr<std::unique_ptr<ShardDirSource>> ShardDirSource::OpenWithIndex(
    const std::string& dir, ShardIndex index, int64_t staging_bytes) {
  std::unique_ptr<ShardDirSource> source(new ShardDirSource());
  source->index_ = std::move(index);
  SHARDKIT_RETURN_IF_ERROR(source->OpenFiles(dir, staging_bytes));
  return source;
}

absl::Status ShardDirSource::OpenFiles(const std::string& dir, int64_t staging_bytes) {
  SHARDKIT_ASSIGN_OR_RETURN(files_, OpenRankFiles(dir, index_));
  for (const Reader& file : files_) {
    identity_.push_back({std::filesystem::path(file.path()).filename().string(),
                         file.identity().size, file.identity().header_digest});
  }
  SHARDKIT_RETURN_IF_ERROR(IndexParameters());
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> staging,
                            AllocateBuffers(1, staging_bytes));
  staging_ = std::move(staging[0]);
  reader_ = std::make_unique<TensorBytesReader>(
      std::span<std::byte>(staging_->data(), staging_->nbytes()));
  touched_.assign(files_.size(), false);
  return absl::OkStatus();
}

// Every parameter over one virtual data region (name order), its old shards found in their rank
// files, and its shards indexed by box.
absl::Status ShardDirSource::IndexParameters() {
  header_.metadata = index_.metadata;
  uint64_t offset = 0;
  for (const IndexParameter& parameter : index_.parameters) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize size,
                              ComputeShapeSize(parameter.shape, parameter.dtype));
    const uint64_t begin = offset;
    offset += static_cast<uint64_t>(size.nbytes);
    header_.tensors.push_back({parameter.name, parameter.dtype, parameter.shape, begin, offset});
    std::vector<specs::ShardMetadata> shards;
    for (const IndexShard& shard : parameter.shards) shards.push_back(shard.metadata);
    Parameter& p = parameters_.emplace_back();
    if (parameter.spec) {
      SHARDKIT_ASSIGN_OR_RETURN(
          p.stored, MakeStoredTensor(parameter.name, parameter.dtype, parameter.shape, begin,
                                     offset, std::move(shards)));
    } else {
      SHARDKIT_ASSIGN_OR_RETURN(
          p.stored.layout, MakeStreamTensor(parameter.name, parameter.dtype, parameter.shape, begin,
                                            offset, /*replicated=*/true, {}));
    }
    std::set<size_t> ranks;
    for (size_t s = 0; s < parameter.shards.size(); ++s) {
      const auto rank = static_cast<size_t>(parameter.shards[s].metadata.placement.rank());
      // A replicated parameter is read from the src_rank's copy only; the others are checked.
      SHARDKIT_ASSIGN_OR_RETURN(const TensorInfo* info, FindShard(files_, parameter, s));
      const bool read = parameter.spec || static_cast<int64_t>(rank) == index_.src_rank;
      p.at.push_back(read ? info : nullptr);
      p.rank_of.push_back(rank);
      if (!read) continue;
      ranks.insert(rank);
    }
    p.ranks.assign(ranks.begin(), ranks.end());
  }
  return absl::OkStatus();
}

absl::Status ShardDirSource::ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const {
  const Parameter& p = parameters_[t];
  if (!p.stored.layout.replicated) {
    return ReadFromBoxes(p.stored, offset, size, dst, *reader_, [&](size_t s, int64_t limit) {
      touched_[p.rank_of[s]] = true;
      reader_->Reset(files_[p.rank_of[s]], *p.at[s], limit);
    });
  }
  // A replicated parameter's copy is the whole tensor.
  for (size_t s = 0; s < p.at.size(); ++s) {
    if (p.at[s] == nullptr) continue;
    touched_[p.rank_of[s]] = true;
    reader_->Reset(files_[p.rank_of[s]], *p.at[s], offset + size);
    return reader_->Copy(offset, size, dst);
  }
  return absl::InternalError(absl::StrCat("no copy of \"", p.stored.layout.name, "\" to read"));
}

absl::Status ShardDirSource::CheckUnchanged(size_t t) const {
  for (size_t rank : parameters_[t].ranks) {
    SHARDKIT_RETURN_IF_ERROR(files_[rank].CheckUnchanged());
  }
  return absl::OkStatus();
}

int64_t ShardDirSource::files_read() const {
  return static_cast<int64_t>(std::count(touched_.begin(), touched_.end(), true));
}

}  // namespace shardkit::checkpoint
