// One tensor item of a DCP checkpoint: the torch.save archive (a zip file, stored, not
// compressed) that FileSystemWriter writes at an item's [offset, offset + length) of a
// `__R_K.distcp` file (metadata.h's StorageItem). ReadTensorRecord finds, without torch and
// without reading the values, where the tensor's raw bytes lie in the file — so that they can be
// read by range, straight from the zip record.
//
//   os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
//   SHARDKIT_ASSIGN_OR_RETURN(torch_zip::TensorRecord record,
//                             torch_zip::ReadTensorRecord(fd.get(), file_size, chunk.item.offset,
//                                                   chunk.item.length, path));
//   // The caller compares record.dtype and record.shape with the chunk's (a mismatch is a bad
//   // checkpoint). If record.row_major, the chunk's values are the bytes
//   // [record.data_offset, record.data_offset + record.data_length) of the file.
//
// What is read and checked (every failure kInvalidArgument naming the file, the item's range and
// the absolute byte offset of what is wrong; kUnavailable for I/O errors):
//   - the zip's end of central directory at the end of the range (a comment allowed), its zip64
//     records when present (torch writes them always), one disk only;
//   - the central directory, inside the range, at most kMaxCentralDirectoryBytes: every entry
//     stored (method 0: compressed and uncompressed sizes equal), not encrypted, unique names
//     under one top folder ("archive/", or whatever torch.save named it), zip64 extra fields;
//   - the local headers of `<top>/data.pkl`, `<top>/byteorder` (if present) and the storage's
//     `<top>/data/<key>`: same name as the central directory's, stored; sizes only from the
//     central directory (torch sets flag 0x08: data descriptors, local sizes 0); each record
//     before the central directory, inside the range and the file;
//   - byteorder "little" (a big-endian archive would need its bytes swapped);
//   - data.pkl (at most kMaxDataPklBytes) with the pickle reader: exactly
//     torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
//     OrderedDict()) with a typed storage (torch.FloatStorage, ...), or _rebuild_tensor_v3(...,
//     dtype) with torch.UntypedStorage (FP8, U16/U32/U64); the persistent id
//     ("storage", class, key, location, numel); no tensor metadata (conjugate/negative bits);
//     the data record's size equal to the storage's bytes; every element the strides reach inside
//     the storage.
// CRC-32s are not checked: torch.load does not check them either (torch 2.15 loads a record with
// a flipped byte, and torch.serialization.set_crc32_options(False) writes zeros), so reading by
// range cannot need them. A writer of these archives should still compute them: zip tools
// (Python's zipfile, unzip) report a bad CRC as corruption.
#ifndef SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_TORCH_ZIP_H_
#define SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_TORCH_ZIP_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace shardkit::torch_zip {

// Largest central directory read (a tensor archive has 7 entries, about 500 bytes).
inline constexpr uint64_t kMaxCentralDirectoryBytes = 1 << 20;
// Largest data.pkl read (a tensor's is under 200 bytes; a 64-dimension one about 1 KiB).
inline constexpr uint64_t kMaxDataPklBytes = 1 << 20;
// The most dimensions a tensor of an archive may have (as many as DCP metadata allows).
inline constexpr size_t kMaxDims = 64;

// Where a tensor item's values are. Offsets are absolute in the file.
struct TensorRecord {
  DType dtype = DType::kFloat32;
  Shape shape;
  Shape strides;               // in elements, as pickled
  int64_t storage_offset = 0;  // in elements, from the storage record's start
  // The strides are shape's row-major ones (dimensions of size 1, and empty tensors, aside): the
  // values are data_length = numel x element size consecutive bytes. Otherwise (a clone() of a
  // transposed tensor keeps its strides) the caller must gather them by `strides`.
  bool row_major = true;
  uint64_t data_offset = 0;  // element [0, ..., 0]
  // Bytes from data_offset to one past the last element the strides reach (0 for an empty tensor).
  uint64_t data_length = 0;
  uint64_t storage_record_offset = 0;  // the whole `data/<key>` record
  uint64_t storage_record_length = 0;
};

// Reads the archive at [offset, offset + length) of the file open as `fd`, `file_size` bytes long
// (the caller's fstat, so that a file that changes size is seen); `source` names the file in
// messages. Reads only the zip's directories, the local headers and data.pkl.
// Errors: kInvalidArgument as in the file comment; kUnavailable for I/O errors.
[[nodiscard]] absl::StatusOr<TensorRecord> ReadTensorRecord(int fd, uint64_t file_size,
                                                            uint64_t offset, uint64_t length,
                                                            std::string_view source);

}  // namespace shardkit::torch_zip

#endif  // SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_TORCH_ZIP_H_
