#include "integration/checkpoint/source/shard_dir_source.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/stream/byte_runs.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "integration/formats/shard_dir/rank_files.h"
#include "integration/io/files.h"
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
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, io::ReadWholeFile(index_path));
  SHARDKIT_ASSIGN_OR_RETURN(source->index_, ParseIndex(text, index_path));
  source->identity_.push_back({kIndexFileName, text.size(), specs::Fingerprint(text), true});
  SHARDKIT_ASSIGN_OR_RETURN(source->files_, OpenRankFiles(dir, source->index_));
  for (const Reader& file : source->files_) {
    source->identity_.push_back({std::filesystem::path(file.path()).filename().string(),
                                 file.identity().size, file.identity().header_digest});
  }
  SHARDKIT_RETURN_IF_ERROR(source->IndexParameters());
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> staging,
                            AllocateBuffers(1, staging_bytes));
  source->staging_ = std::move(staging[0]);
  source->reader_ = std::make_unique<TensorBytesReader>(
      std::span<std::byte>(source->staging_->data(), source->staging_->nbytes()));
  source->touched_.assign(source->files_.size(), false);
  return source;
}

// Every parameter over one virtual data region (name order), its old shards found in their rank
// files, and its non-empty shards indexed by span.
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
    SHARDKIT_ASSIGN_OR_RETURN(
        p.layout, MakeStreamTensor(parameter.name, parameter.dtype, parameter.shape, begin, offset,
                                   !parameter.spec, std::move(shards)));
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
      if (!parameter.spec) continue;
      const ByteRuns& runs = p.layout.runs[s];
      if (runs.bytes() == 0) continue;
      p.spans.push_back({runs.Offset(0), runs.Offset(runs.count - 1) + runs.length, s});
    }
    p.ranks.assign(ranks.begin(), ranks.end());
    std::sort(p.spans.begin(), p.spans.end(),
              [](const Span& a, const Span& b) { return a.begin < b.begin; });
    int64_t most = 0;
    for (const Span& span : p.spans) p.max_end.push_back(most = std::max(most, span.end));
  }
  return absl::OkStatus();
}

absl::Status ShardDirSource::ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const {
  const Parameter& p = parameters_[t];
  if (p.layout.replicated) {
    for (size_t s = 0; s < p.at.size(); ++s) {
      if (p.at[s] != nullptr) return ReadShard(p, s, offset, size, dst);
    }
    return absl::InternalError(absl::StrCat("no copy of \"", p.layout.name, "\" to read"));
  }
  const int64_t end = offset + size;
  // Candidates: spans that start before `end`, from the first whose running maximum of ends
  // passes `offset` (both ascending).
  const auto first = static_cast<size_t>(
      std::upper_bound(p.max_end.begin(), p.max_end.end(), offset) - p.max_end.begin());
  const auto last = static_cast<size_t>(
      std::lower_bound(p.spans.begin(), p.spans.end(), end,
                       [](const Span& span, int64_t at) { return span.begin < at; }) -
      p.spans.begin());
  for (size_t i = first; i < last; ++i) {
    if (p.spans[i].end <= offset) continue;
    SHARDKIT_RETURN_IF_ERROR(ReadShard(p, p.spans[i].shard, offset, size, dst));
  }
  return absl::OkStatus();
}

// The part of shard `s` inside tensor bytes [offset, offset + size), each piece at its place in
// dst (dst holds tensor byte `offset` first). A replicated parameter's copy is the whole tensor.
absl::Status ShardDirSource::ReadShard(const Parameter& p, size_t s, int64_t offset, int64_t size,
                                       std::byte* dst) const {
  const size_t rank = p.rank_of[s];
  touched_[rank] = true;
  if (p.layout.replicated) {
    reader_->Reset(files_[rank], *p.at[s], offset + size);
    return reader_->Copy(offset, size, dst);
  }
  const ByteRuns& runs = p.layout.runs[s];
  const auto [first, count] = ShardSpan(runs, offset, offset + size);
  if (count == 0) return absl::OkStatus();
  reader_->Reset(files_[rank], *p.at[s], first + count);
  // The pieces follow each other in the shard's bytes: staging-sized preads of exactly them.
  absl::Status status;
  ForEachPiece(runs, offset, offset + size, [&](int64_t tensor_at, int64_t shard_at, int64_t n) {
    if (status.ok()) status = reader_->Want(shard_at, n, dst + (tensor_at - offset));
  });
  if (!status.ok()) return status;  // a failed Want left nothing pending
  return reader_->Flush();
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
