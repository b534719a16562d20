// The writer of one tensor item of a DCP checkpoint (the reader is torch_zip.h): the torch.save
// archive of one row-major tensor, as torch 2.15's torch.save (and so dcp.save's FileSystemWriter)
// lays it out, split around the tensor's values so that the caller can write them itself, by
// range, without holding them in memory:
//
//   SHARDKIT_ASSIGN_OR_RETURN(torch_zip::TensorArchive archive,
//                             torch_zip::MakeTensorArchive(DType::kBFloat16, {4096, 4096}));
//   // item = [at, at + archive.size()) of the file:
//   //   archive.prefix at `at`, the values at `at + archive.prefix.size()` (data_length bytes,
//   //   row-major, little-endian), archive.suffix after them.
//
// The archive (a zip, stored, every record's data 64-byte aligned from the archive's start by an
// "FB" padding extra field in its local header, as torch pads them): archive/data.pkl
// (torch._utils._rebuild_tensor_v2 with the dtype's typed storage, torch.FloatStorage ..., or
// _rebuild_tensor_v3 with torch.storage.UntypedStorage and the dtype for FP8 and U16/U32/U64;
// storage offset 0, row-major strides, requires_grad False, an empty OrderedDict of hooks),
// archive/.format_version "1", archive/.storage_alignment "64", archive/byteorder "little",
// archive/data/0 (the values), archive/version "3\n", archive/.data/serialization_id (40
// digits, derived from the dtype and shape so that the same input gives the same bytes). Flags
// 0x808 (UTF-8 names, data descriptors after the data: local sizes 0), or 0x800 and no
// descriptor for an empty record, as torch writes them; zip64 extra fields for a size or a local
// header offset of 0xffffffff or more, with 8-byte sizes in that record's descriptor; zip64 end
// records always; times and versions 0 as torch writes them.
//
// CRC-32s: right for every record but data/0, whose CRC-32 is 0 in its descriptor and central
// directory entry (the values never pass through here), exactly as torch itself writes every
// record under torch.serialization.set_crc32_options(False). torch.load does not check CRC-32s:
// torch 2.15's torch.load of such an archive gives the values (checked by
// torch_zip_writer_torch_test, which also checks that the archive equals torch.save's own of
// the same tensor byte for byte, serialization_id and data/0's CRC-32 aside). Python's zipfile
// reports a bad CRC-32 when it reads data/0 through to its end, and `unzip -t` too.
#ifndef SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_TORCH_ZIP_WRITER_H_
#define SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_TORCH_ZIP_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace shardkit::torch_zip {

// A torch.save archive of one row-major tensor, whose values the caller writes at
// [prefix.size(), prefix.size() + data_length) of the item.
struct TensorArchive {
  std::string prefix;        // the records before the values, data/0's local header last
  uint64_t data_length = 0;  // numel x element size
  std::string suffix;        // data/0's data descriptor (none when data_length is 0), the
                             // records after it, the central directory, zip64 end records, end
                             // of central directory
  uint64_t size() const { return prefix.size() + data_length + suffix.size(); }
};

// Errors: kInvalidArgument for a dtype torch.save cannot hold that way (the sub-byte ones, named)
// and for a shape whose byte size does not fit 63 bits (named).
[[nodiscard]] absl::StatusOr<TensorArchive> MakeTensorArchive(DType dtype, const Shape& shape);

}  // namespace shardkit::torch_zip

#endif  // SHARDKIT_INTEGRATION_FORMATS_TORCH_ZIP_TORCH_ZIP_WRITER_H_
