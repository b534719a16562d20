// From a parsed `.metadata` pickle to dcp::Metadata (metadata.h): torch's dataclasses read field
// by field, each chunk and bytes item joined with its storage_data entry. The checks that need
// the whole entry (chunks inside the tensor, no overlap, cover, items) are metadata.cc's.
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_INTERNAL_METADATA_PICKLE_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_INTERNAL_METADATA_PICKLE_H_

#include "absl/status/statusor.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/pickle/pickle_reader.h"

namespace shardkit::dcp::internal {

// Tensors and bytes items sorted by fqn; `files` and `digest` left empty.
// Errors: kInvalidArgument "pickle byte N: <what>: ..." or naming the key (an fqn twice, a chunk
// or bytes item without its storage_data entry, an entry that belongs to nothing, dims over
// kMaxDims, transform_descriptors, a dtype or layout shardkit cannot read).
[[nodiscard]] absl::StatusOr<Metadata> MetadataFromPickle(const pickle::Pickle& pickle);

}  // namespace shardkit::dcp::internal

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_INTERNAL_METADATA_PICKLE_H_
