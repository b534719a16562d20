// ShardDirSource: an earlier shard directory (what `shardkit shard` writes) as a TensorSource, for
// `shardkit reshard` — every parameter whole over one virtual data region (name order, as
// index.json lists them), each byte range read from the old shards that hold it.
//
//   SHARDKIT_ASSIGN_OR_RETURN(ShardDirSource dir, ShardDirSource::Open("shards", staging_bytes));
//   SHARDKIT_RETURN_IF_ERROR(dir.ReadBytes(t, offset, n, dst));  // bytes of parameter t
//
// A read touches only the old shards it overlaps: each parameter's shards are indexed by their
// boxes (specs/shard_box_index.h) and a read of tensor bytes looks up the rows those bytes lie in,
// so finding them is a binary search per dimension plus the shards found — never all pairs of old
// and new shards. From each old
// shard the read takes one contiguous range of its own bytes (core/tensor/byte_runs.h) and nothing
// else: a piece of 64 KiB or more, or a piece alone, with one pread straight into place, shorter
// pieces through a reused staging buffer filled with exactly them (TensorBytesReader::Want). So the
// bytes pread are the bytes asked for: a reader that wants a rank's columns asks for those pieces
// (TensorBytesReader::Want), not for the rows around them. A replicated parameter is read from
// index.json's src_rank copy, as `gather` does.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SHARD_DIR_SOURCE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SHARD_DIR_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/allocator.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/stored_tensor.h"
#include "integration/checkpoint/source/tensor_source.h"
#include "integration/checkpoint/stream/stream_schedule.h"
#include "integration/checkpoint/stream/tensor_bytes_reader.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

class ShardDirSource : public TensorSource {
 public:
  // Reads and validates DIR/index.json (ParseIndex), opens every rank file and checks that it
  // holds exactly the shards index.json lists for it, with their dtypes and shapes. The staging
  // buffer for short pieces has `staging_bytes` (> 0) and is allocated here.
  // Errors: kNotFound (no index.json, a missing rank file); kInvalidArgument naming the file, the
  // tensor or the JSON path; kResourceExhausted if the staging buffer cannot be allocated.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ShardDirSource>> Open(const std::string& dir,
                                                                            int64_t staging_bytes);
  // As Open, for a caller that has read DIR/index.json itself (`gather`: ReadIndex and its
  // messages); identity() then lists the rank files only. Errors: as Open's after index.json.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ShardDirSource>> OpenWithIndex(
      const std::string& dir, ShardIndex index, int64_t staging_bytes);

  const ShardIndex& index() const { return index_; }
  const safetensors::Header& header() const override { return header_; }
  // index.json (all of its bytes), then rank-00000.safetensors, … (header bytes).
  const std::vector<CheckpointFile>& identity() const override { return identity_; }
  [[nodiscard]] absl::Status ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const override;
  [[nodiscard]] absl::Status CheckUnchanged(size_t t) const override;
  const void* FilesOf(size_t t) const override { return &parameters_[t]; }

  // How many of the old rank files reads have touched so far.
  int64_t files_read() const;
  // The bytes pread from the old rank files so far.
  int64_t bytes_read() const { return reader_->bytes_read(); }
  std::optional<FileReads> file_reads() const override {
    return FileReads{files_read(), bytes_read()};
  }

 private:
  struct Parameter {
    StoredTensor stored;  // the old shards (replicated: the layout only, no boxes)
    std::vector<const safetensors::TensorInfo*> at;  // per shard, in its rank file (or nullptr)
    std::vector<size_t> rank_of;                     // per shard: the rank file holding it
    std::vector<size_t> ranks;                       // the rank files read, ascending
  };

  ShardDirSource() = default;
  // The rank files of index_, the parameters indexed, the staging buffer.
  absl::Status OpenFiles(const std::string& dir, int64_t staging_bytes);
  absl::Status IndexParameters();

  ShardIndex index_;
  std::vector<safetensors::Reader> files_;  // by rank
  safetensors::Header header_;
  std::vector<CheckpointFile> identity_;
  std::vector<Parameter> parameters_;  // as header_.tensors
  std::shared_ptr<Storage> staging_;
  std::unique_ptr<TensorBytesReader> reader_;  // over staging_
  mutable std::vector<bool> touched_;          // by rank
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SHARD_DIR_SOURCE_H_
