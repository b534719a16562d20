// CheckpointSource: the checkpoint a `--checkpoint PATH` names, as the source rank reads it — one
// safetensors file, or every file of a Hugging Face index (`model.safetensors.index.json`:
// {"metadata": {"total_size": N}, "weight_map": {"tensor": "model-00001-of-00002.safetensors"}},
// files relative to the index, other top-level keys ignored).
//
//   SHARDKIT_ASSIGN_OR_RETURN(CheckpointPath where, ResolveCheckpointPath("ckpt_dir"));
//   SHARDKIT_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::Open(where, &warnings));
//   for (size_t i = 0; i < source.header().tensors.size(); ++i) {
//     source.file(i).ReadBytes(source.info(i), 0, n, dst);  // tensor i's bytes, from its file
//   }
//
// header() merges the files: every tensor with offsets in one virtual data region (file after
// file, in file-name order, each file's tensors in file order), and the union of the files'
// __metadata__. Only the files are read; nothing is mapped.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_CHECKPOINT_SOURCE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_CHECKPOINT_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/source/tensor_source.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

enum class CheckpointKind { kSafetensors, kIndex, kShardDirectory, kDcpDirectory };

struct CheckpointPath {
  CheckpointKind kind = CheckpointKind::kSafetensors;
  std::string path;  // the file, the index, or the shard directory
};

// A file is a safetensors file, or an index if its name ends in ".index.json". A directory is a
// shard directory if its index.json says "format": "shardkit-shards"; else it must hold exactly
// one *.safetensors.index.json (that index), else exactly one *.safetensors (that file) — unless
// that file's name says it is one of several (PREFIX-K-of-N.safetensors, N > 1: what a multi-file
// write that stopped before its index leaves). Errors: kNotFound if `path` does not exist;
// kInvalidArgument for a directory with none or several candidates, listing what it holds, or
// with only a numbered file of several.
[[nodiscard]] absl::StatusOr<CheckpointPath> ResolveCheckpointPath(const std::string& path);

class CheckpointSource : public TensorSource {
 public:
  // Opens a safetensors file or an index and every file it names, and validates them all before
  // any data moves: every file exists and parses, every tensor of the weight map is in the file
  // the map names and in no other, no file holds a tensor the map omits, and no __metadata__ key
  // has two values. Warnings (appended to `warnings`): a total_size that equals neither the
  // tensors' bytes nor the files' sizes; a safetensors file that an index beside it names along
  // with other files (one file of a multi-file checkpoint given alone). Errors: kNotFound,
  // kInvalidArgument naming the file, the tensor or the key; a shard directory is kInvalidArgument
  // pointing at `shardkit reshard`.
  [[nodiscard]] static absl::StatusOr<CheckpointSource> Open(const CheckpointPath& where,
                                                             std::vector<std::string>* warnings);

  const safetensors::Header& header() const override { return header_; }
  // The file holding header().tensors[i], and the tensor's entry there.
  const safetensors::Reader& file(size_t i) const { return files_[where_[i].first]; }
  const safetensors::TensorInfo& info(size_t i) const {
    return files_[where_[i].first].header().tensors[where_[i].second];
  }
  size_t file_count() const { return files_.size(); }
  // A tensor's bytes are one range of its file.
  std::optional<FileRange> FileRangeOf(size_t t, int64_t offset, int64_t size) const override;
  const std::string& file_path(size_t f) const { return files_[f].path(); }
  // The index first (if any), then every safetensors file in file-name order, as opened.
  const std::vector<CheckpointFile>& identity() const override { return identity_; }

  [[nodiscard]] absl::Status ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const override {
    return file(t).ReadBytes(info(t), static_cast<uint64_t>(offset), static_cast<uint64_t>(size),
                             dst);
  }
  [[nodiscard]] absl::Status CheckUnchanged(size_t t) const override {
    return file(t).CheckUnchanged();
  }
  const void* FilesOf(size_t t) const override { return &file(t); }

 private:
  // `names`: the files' names as identity() lists them.
  static absl::StatusOr<CheckpointSource> FromFiles(std::vector<safetensors::Reader> files,
                                                    const std::vector<std::string>& names,
                                                    const std::string& source);

  std::vector<safetensors::Reader> files_;
  safetensors::Header header_;
  std::vector<std::pair<size_t, size_t>> where_;  // per merged tensor: (file, index in it)
  std::vector<CheckpointFile> identity_;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_CHECKPOINT_SOURCE_H_
