// The metadata of a PyTorch DCP checkpoint directory (torch.distributed.checkpoint,
// FileSystemWriter as torch 2.15 writes it), read without torch: which state-dict keys it holds,
// and for each tensor its dtype, shape and saved chunks with the byte range of the file that holds
// each chunk.
//
//   SHARDKIT_ASSIGN_OR_RETURN(dcp::Metadata metadata, dcp::ReadMetadata("ckpt"));
//   for (const dcp::TensorEntry& tensor : metadata.tensors) {
//     for (const dcp::Chunk& chunk : tensor.chunks) {
//       // chunk.offsets / chunk.sizes: a box of tensor.shape; chunk.item: the torch.save archive
//       // holding it, [item.offset, item.offset + item.length) of "ckpt/" + item.file — open it
//       // with dcp::ReadTensorRecord (torch_zip.h) to find the raw bytes.
//     }
//   }
//
// A directory holds either `.metadata` (dcp.save's default) or, when saved with
// dcp.save(use_collectives=False), one `__R.metadata` per rank R, each listing only what rank R
// wrote; ReadMetadata then combines them: the union of their chunks, where a chunk with the same
// box in several files (a replicated tensor, written by every rank) is kept once, from the lowest
// rank; entries present in several files must agree on kind, dtype and shape. `.metadata` wins
// when both kinds are present (as torch's loader does).
//
// Checked (every failure kInvalidArgument naming the file, the key and the chunk, and for a pickle
// problem the byte offset): the pickle itself (pickle_reader.h: only the allow-list of globals,
// never run); the shape of torch's dataclasses (unknown fields, wrong types); dtypes that shardkit
// has (torch.complex128, the quantized and packed ones are refused); strided layout; at most
// kMaxDims dimensions and a byte size that fits 63 bits; every chunk inside the tensor, no two
// chunks overlapping (specs::FindOverlap's sweep, never a pass over every pair) and together
// covering the tensor exactly; one storage_data entry per chunk and per bytes item, and no other;
// item files plain names in the directory (no '/', no "..");
// transform_descriptors (DCP's compression extension: not readable by range) refused naming the
// item; FileSystemWriter(serialization_format=SAFETENSORS) output refused naming the item — its
// tensor items hold no torch.save archive (an item no longer than the chunk's raw bytes) and share
// one offset (items overlapping in a file). Item byte ranges are not checked against the files
// here (ReadTensorRecord does, with the file open).
//
// Cost: time and memory linear in the metadata's size, the overlap check O(n log n) for chunks cut
// along one or two dimensions (specs::FindOverlap). Measured on a 129 MB `.metadata` of a million
// chunks that torch 2.15 wrote: 5.5 s and 1.3 GB at the peak (Python's pickle.load of it: 12.6 s,
// 2.0 GB).
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_METADATA_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_METADATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace shardkit::dcp {

// Most dimensions a tensor may have (torch's own limit is 64 too).
inline constexpr size_t kMaxDims = 64;

// Where an item's bytes are: [offset, offset + length) of `file` in the checkpoint directory.
struct StorageItem {
  std::string file;  // _StorageInfo.relative_path: a plain file name ("__0_0.distcp")
  uint64_t offset = 0;
  uint64_t length = 0;
};

// One saved box of a tensor and the torch.save archive that holds its values.
struct Chunk {
  Shape offsets;
  Shape sizes;
  StorageItem item;
};

struct TensorEntry {
  std::string fqn;  // the state-dict key, flattened ("model.layers.0.weight")
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<Chunk> chunks;  // in the metadata's order (rank order when combined)
};

// A non-tensor item (a step counter, dataloader state, ...): its item is a torch.save archive of
// a Python object, which shardkit does not read.
struct BytesEntry {
  std::string fqn;
  StorageItem item;
};

// A step of a key's path in the nested state dict: a dict key or a list index.
using PathStep = std::variant<std::string, int64_t>;

struct Metadata {
  std::vector<TensorEntry> tensors;  // sorted by fqn
  std::vector<BytesEntry> bytes;     // sorted by fqn
  // DefaultSavePlanner's planner_data: each flattened key's path in the nested state dict
  // ("opt.param_groups.0.lr" -> "opt", "param_groups", 0, "lr"); empty if the pickle has None.
  std::map<std::string, std::vector<PathStep>> planner_data;
  std::string version;  // Metadata.version ("1.0.0"); empty if None
  // The metadata files read, relative to the directory: {".metadata"} or {"__0.metadata", ...}.
  std::vector<std::string> files;
  // What identifies the metadata read (equal digests: the same files, byte for byte): the
  // SHA-256 ("sha256:<hex>", specs/fingerprint.h) of one line per file, in `files` order:
  // "<name> <size in bytes> <sha256:hex of its bytes>\n".
  std::string digest;
};

// Parses and checks one metadata file's bytes; `source` names it in messages and is its name in
// `files` and `digest`. `require_cover` false: chunks need not cover their tensors (one
// `__R.metadata` read alone lists only rank R's). Errors: kInvalidArgument as above.
[[nodiscard]] absl::StatusOr<Metadata> ParseMetadata(std::string_view bytes,
                                                     std::string_view source,
                                                     bool require_cover = true);

// Whether `dir` holds `.metadata` or `__0.metadata` (what makes it a DCP checkpoint here).
bool IsDcpDirectory(const std::string& dir);

// Reads and checks the metadata of checkpoint directory `dir` (see the file comment).
// Errors: kInvalidArgument as above, and when `dir` cannot be listed (a regular file), holds
// neither `.metadata` nor `__R.metadata` files, or the ranks of its `__R.metadata` files are not
// 0..N-1; kNotFound if `dir` does not exist; kUnavailable for I/O errors.
[[nodiscard]] absl::StatusOr<Metadata> ReadMetadata(const std::string& dir);

}  // namespace shardkit::dcp

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_METADATA_H_
