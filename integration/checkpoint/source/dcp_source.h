// DcpSource: a PyTorch DCP checkpoint directory (torch.distributed.checkpoint, FileSystemWriter:
// `.metadata` or `__R.metadata`, `__R_K.distcp` files) as a TensorSource, for `shardkit reshard
// --in`, `gather` and `inspect` — every tensor whole over one virtual data region (name order),
// each byte range read from the saved chunks that hold it, straight from their torch.save zip
// records (integration/formats/torch_zip/torch_zip.h), by range, as stored_tensor.h reads boxes.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<DcpSource> dcp, DcpSource::Open("ckpt", staging));
//   SHARDKIT_RETURN_IF_ERROR(dcp->ReadBytes(t, offset, n, dst));  // bytes of tensor t
//
// Open reads and checks the metadata (dcp::ReadMetadata) and then, for every chunk, its zip record
// (torch_zip::ReadTensorRecord: a few small preads per chunk, no tensor bytes): the record's dtype
// and shape must be the chunk's. Bytes move exactly as saved: no dtype conversion. Non-tensor items
// (BytesStorageMetadata: step counters, dataloader state) are not read; skipped() names them.
// A chunk saved with strides that are not row-major (a clone() of a transposed tensor keeps its
// strides) is read element run by element run (one pread per run of elements that lie next to
// each other in the file: correct and within the memory bound, but slow for a large transposed
// chunk); one of a sub-byte dtype is refused (kInvalidArgument naming the key and the item).
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_DCP_SOURCE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_DCP_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/os/opened_file.h"
#include "core/tensor/allocator.h"
#include "integration/checkpoint/source/stored_tensor.h"
#include "integration/checkpoint/source/tensor_source.h"
#include "integration/checkpoint/stream/tensor_bytes_reader.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/safetensors/safetensors.h"
#include "integration/formats/torch_zip/torch_zip.h"

namespace shardkit::checkpoint {

class DcpSource : public TensorSource {
 public:
  // The largest non-tensor item ReadItems reads (they are small: numbers, lists, a dataloader's
  // state); a larger one is refused rather than held in memory.
  static constexpr uint64_t kMaxItemBytes = uint64_t{1} << 30;

  // Reads the metadata of `dir` and every chunk's zip record, opening each `.distcp` file once.
  // The staging buffer for short pieces has `staging_bytes` (> 0) and is allocated here.
  // Errors: kNotFound (no such directory, a missing `.distcp` file); kInvalidArgument naming the
  // file, the key, the item's byte range (dcp::ReadMetadata's and torch_zip::ReadTensorRecord's
  // checks, a record whose dtype or shape is not its chunk's, a chunk not row-major);
  // kUnavailable for I/O errors; kResourceExhausted if the staging buffer cannot be allocated.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DcpSource>> Open(const std::string& dir,
                                                                       int64_t staging_bytes);

  const dcp::Metadata& metadata() const { return metadata_; }
  // The keys of the non-tensor items, which no command reads (sorted).
  std::vector<std::string> skipped() const;
  // "warning: DIR: N non-tensor items are not read ...: KEY, KEY, ..." (the first 8 keys), or ""
  // when there are none: what the commands that read tensors only print.
  // For the items `counted` accepts (those a selection picks).
  std::string SkippedWarning(absl::FunctionRef<bool(const std::string& key)> counted) const;
  // The bytes of the non-tensor items whose key `keep` accepts, by key, as they are in their
  // files (a torch.save archive of a Python object each: never unpickled here) — what a DCP
  // output carries over (formats/dcp/dcp_rank_file.h), and what LoadShards hands its caller.
  // Errors: kInvalidArgument naming the key and its item if the item lies beyond its file's end
  // or is larger than kMaxItemBytes; kNotFound for a missing file; kUnavailable for I/O errors.
  [[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> ReadItems(
      absl::FunctionRef<bool(const std::string& key)> keep) const;

  // Tensors in key order; __metadata__ {"format": "pt"} (torch's tensors, as safetensors' torch
  // writer marks its files).
  const safetensors::Header& header() const override { return header_; }
  // The metadata files as one entry (their names joined by '+', their total size, the
  // metadata's digest), then every `.distcp` file that holds a chunk (its size only).
  const std::vector<CheckpointFile>& identity() const override { return identity_; }
  [[nodiscard]] absl::Status ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const override;
  [[nodiscard]] absl::Status CheckUnchanged(size_t t) const override;
  const void* FilesOf(size_t t) const override { return &tensors_[t]; }

  // How many of the `.distcp` files reads have touched so far.
  int64_t files_read() const;
  // The bytes pread from the `.distcp` files so far.
  int64_t bytes_read() const { return reader_->bytes_read(); }
  std::optional<FileReads> file_reads() const override {
    return FileReads{files_read(), bytes_read()};
  }

 private:
  // Where one chunk's row-major values are.
  struct ChunkBytes {
    size_t file = 0;           // into files_
    uint64_t data_offset = 0;  // in the file: element [0, ..., 0]
    int64_t bytes = 0;         // of its values, row-major
    Shape sizes;               // not row-major only: the chunk's shape, its strides (elements)
    Shape strides;             // and its element size in bytes
    int64_t element_bytes = 0;
  };
  struct Tensor {
    StoredTensor stored;         // the chunks as boxes
    std::vector<ChunkBytes> at;  // per chunk
    std::vector<size_t> files;   // the files read, ascending
  };

  DcpSource() = default;
  absl::Status OpenFiles(const std::string& dir);
  absl::Status IndexTensors(const std::string& dir);
  absl::StatusOr<size_t> FileOf(const std::string& dir, const std::string& name);
  absl::StatusOr<torch_zip::TensorRecord> RecordOf(const std::string& dir,
                                                   const dcp::TensorEntry& entry,
                                                   const dcp::Chunk& chunk, size_t* f);
  static uint64_t ElementAt(const ChunkBytes& chunk, int64_t k);
  // Row-major bytes [from, from + n) of a chunk that is not row-major, into dst.
  absl::Status ReadStrided(const ChunkBytes& chunk, int64_t from, int64_t n, std::byte* dst) const;

  std::string dir_;
  dcp::Metadata metadata_;
  std::vector<os::OpenedFile> files_;
  std::map<std::string, size_t> file_index_;  // a file's name in the directory -> files_
  safetensors::Header header_;
  std::vector<CheckpointFile> identity_;
  std::vector<Tensor> tensors_;  // as header_.tensors
  std::shared_ptr<Storage> staging_;
  std::unique_ptr<TensorBytesReader> reader_;  // over staging_
  mutable std::vector<bool> touched_;          // by file
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_DCP_SOURCE_H_
