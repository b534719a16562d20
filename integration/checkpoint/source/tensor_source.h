// TensorSource: what the streaming path of `shardkit shard` reads tensor bytes from — the tensors
// of a checkpoint (CheckpointSource: a safetensors file or a Hugging Face index) or of an earlier
// shard directory (ShardDirSource, for `shardkit reshard`: each tensor assembled from its shards).
//
//   const safetensors::Header& h = source.header();  // tensors over one virtual data region
//   SHARDKIT_RETURN_IF_ERROR(source.CheckUnchanged(t));            // before a round reads t
//   SHARDKIT_RETURN_IF_ERROR(source.ReadBytes(t, offset, n, dst));  // bytes of h.tensors[t]
//
// Implementations are read by one thread at a time.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_TENSOR_SOURCE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_TENSOR_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::checkpoint {

// One file of a source as ranks compare it before each reads its own shards
// (checkpoint_identity.h): its name relative to the source's directory, its size, and the SHA-256
// of its header bytes (a safetensors file) or of all of it (an index).
struct CheckpointFile {
  std::string name;
  uint64_t size = 0;
  std::string digest;  // "sha256:<hex>"
  bool whole = false;  // the digest is of all its bytes (an index), not of its header
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // Every tensor (name, dtype, shape, offsets in one virtual data region) and the __metadata__.
  virtual const safetensors::Header& header() const = 0;
  // The files, as opened (index files first).
  virtual const std::vector<CheckpointFile>& identity() const = 0;

  // Bytes [offset, offset + size) of header().tensors[t]'s data into `dst`.
  // Errors: kUnavailable naming the file on I/O errors or a truncated file.
  [[nodiscard]] virtual absl::Status ReadBytes(size_t t, int64_t offset, int64_t size,
                                               std::byte* dst) const = 0;
  // Whether the files tensor t is read from are still the ones opened (not resized or replaced:
  // safetensors::Reader::CheckUnchanged). Errors: kInvalidArgument naming the file.
  [[nodiscard]] virtual absl::Status CheckUnchanged(size_t t) const = 0;
  // Tensors with the same key are read from the same files (a round checks them once).
  virtual const void* FilesOf(size_t t) const = 0;

  // A source that reads through its own reader (a shard directory, a DCP checkpoint): how many
  // of its files reads have touched so far and the bytes pread from them, gaps included. Other
  // sources (a checkpoint, read by range by its caller's reader) say nothing.
  struct FileReads {
    int64_t files = 0;
    int64_t bytes = 0;
  };
  virtual std::optional<FileReads> file_reads() const { return std::nullopt; }

  // Where bytes [offset, offset + size) of tensor t lie in one file, one after the other, when
  // they do and the source can say (a checkpoint's safetensors files): a writer may then copy
  // them inside the kernel (os::AtomicFile::CopyFrom) instead of reading them. nullopt: read them.
  struct FileRange {
    int fd = -1;
    const std::string* path = nullptr;  // names the file in messages
    uint64_t offset = 0;
  };
  virtual std::optional<FileRange> FileRangeOf(size_t t, int64_t offset, int64_t size) const {
    return std::nullopt;
  }
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_TENSOR_SOURCE_H_
