// libFuzzer target for the torch.save archive reader of DCP tensor items: the input is one
// archive (an item's bytes), read as a file through ReadTensorRecord. Besides "never crash", it
// checks invariants:
//   - every rejection is kInvalidArgument;
//   - an accepted archive's tensor lies inside its storage record, which lies inside the input,
//     and those bytes read back;
//   - a row-major record spans exactly numel x element size bytes.
// Built with clang by `tools/fuzz dcp_zip` (seeded with the items of the fixtures' .distcp files);
// without libFuzzer, //integration/formats/dcp/fuzz:dcp_zip_fuzzer replays files.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/check.h"
#include "core/tensor/dtype.h"
#include "integration/formats/torch_zip/torch_zip.h"
#include "specs/fuzz/memory_file.h"

namespace shardkit::dcp {

using ::shardkit::torch_zip::ReadTensorRecord;
using ::shardkit::torch_zip::TensorRecord;
namespace {

void FuzzOne(const uint8_t* data, size_t size) {
  const int fd = fuzz::MemoryFile(data, size);
  absl::StatusOr<TensorRecord> record = ReadTensorRecord(fd, size, 0, size, "fuzz");
  if (!record.ok()) {
    SHARDKIT_CHECK(record.status().code() == absl::StatusCode::kInvalidArgument)
        << record.status().ToString();
    return;
  }
  SHARDKIT_CHECK(record->storage_record_offset <= size &&
                 record->storage_record_length <= size - record->storage_record_offset);
  SHARDKIT_CHECK(record->data_offset >= record->storage_record_offset &&
                 record->data_offset - record->storage_record_offset <=
                     record->storage_record_length &&
                 record->data_length <= record->storage_record_offset +
                                            record->storage_record_length - record->data_offset);
  if (record->row_major) {
    uint64_t bytes = ElementSize(record->dtype);
    for (int64_t dim : record->shape) bytes *= static_cast<uint64_t>(dim);
    SHARDKIT_CHECK(record->data_length == bytes) << record->data_length << " != " << bytes;
  }
  std::string values(record->data_length, '\0');
  SHARDKIT_CHECK(pread(fd, values.data(), values.size(), static_cast<off_t>(record->data_offset)) ==
                 static_cast<ssize_t>(values.size()));
}

}  // namespace
}  // namespace shardkit::dcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardkit::dcp::FuzzOne(data, size);
  return 0;
}
