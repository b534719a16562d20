// HfShardedSource: a directory of safetensors files whose tensors are pieces of larger ones, each
// placed by its file's __metadata__ DCP_SHARDING_INFO (formats/safetensors/sharding_info.h) — what
// torch's HuggingFaceStorageWriter writes with save_distributed=True
// (shard-RRRRR-model-….safetensors, and no index) — as a TensorSource: every tensor whole over one
// virtual data region (name order), each byte range read from the pieces that hold it, by range, as
// stored_tensor.h reads boxes.
//
//   if (HfShardedSource::Holds(dir)) {
//     SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<HfShardedSource> source,
//                               HfShardedSource::Open(dir, staging_bytes));
//   }
//
// Open reads every *.safetensors header of `dir` (in name order) and checks: every tensor of a file
// that carries the key is listed in it (and only those), pieces of one name agree on dtype and
// rank, and together tile the whole tensor (its shape: the largest offset + size per dimension)
// exactly, with no overlap (specs::ValidateTiling). The files' other __metadata__ keys that agree
// across files become the header's (DCP_SHARDING_INFO and DCP_VERSION are left out).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_HF_SHARDED_SOURCE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_HF_SHARDED_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/allocator.h"
#include "integration/checkpoint/source/stored_tensor.h"
#include "integration/checkpoint/source/tensor_source.h"
#include "integration/checkpoint/stream/tensor_bytes_reader.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

class HfShardedSource : public TensorSource {
 public:
  // Whether `dir` holds *.safetensors files that carry DCP_SHARDING_INFO and place some tensor as a
  // piece (at a non-zero offset, or in several files) — a sharded save, not a whole checkpoint —
  // and no shardkit rank files (rank-NNNNN.safetensors: a shard directory, finished or not).
  // Reads the files' headers only; false on any error (Open then says what is wrong).
  static bool Holds(const std::string& dir);

  // Errors: kNotFound (no such directory); kInvalidArgument naming the file and the tensor (a
  // malformed file or key, a tensor the key does not place, pieces that disagree, overlap or leave
  // a gap); kResourceExhausted if the staging buffer (`staging_bytes`, > 0) cannot be allocated.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HfShardedSource>> Open(const std::string& dir,
                                                                             int64_t staging_bytes);

  const safetensors::Header& header() const override { return header_; }
  // Every file (header bytes' digest), in name order.
  const std::vector<CheckpointFile>& identity() const override { return identity_; }
  [[nodiscard]] absl::Status ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const override;
  [[nodiscard]] absl::Status CheckUnchanged(size_t t) const override;
  const void* FilesOf(size_t t) const override { return &tensors_[t]; }
  std::optional<FileReads> file_reads() const override;

  // How many pieces tensor t was saved in.
  size_t pieces(size_t t) const { return tensors_[t].pieces.size(); }

 private:
  struct Piece {
    size_t file = 0;
    const safetensors::TensorInfo* info = nullptr;
  };
  struct Tensor {
    StoredTensor stored;        // the pieces as boxes
    std::vector<Piece> pieces;  // as stored's boxes
    std::vector<size_t> files;  // the files read, ascending
  };

  HfShardedSource() = default;
  absl::Status IndexTensors(const std::string& dir);

  std::vector<safetensors::Reader> files_;  // name order
  safetensors::Header header_;
  std::vector<CheckpointFile> identity_;
  std::vector<Tensor> tensors_;  // as header_.tensors
  std::shared_ptr<Storage> staging_;
  std::unique_ptr<TensorBytesReader> reader_;
  mutable std::vector<bool> touched_;  // by file
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_HF_SHARDED_SOURCE_H_
