#include "integration/checkpoint/source/saved_directory.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/source/dcp_source.h"
#include "integration/checkpoint/source/shard_dir_source.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::checkpoint {

absl::StatusOr<SavedDirectory> OpenSavedDirectory(const std::string& dir, int64_t staging_bytes,
                                                  std::vector<std::string>* warnings) {
  SavedDirectory saved;
  if (dcp::IsDcpDirectory(dir)) {
    SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<DcpSource> dcp, DcpSource::Open(dir, staging_bytes));
    if (std::string warning = dcp->SkippedWarning(); !warning.empty() && warnings != nullptr) {
      warnings->push_back(std::move(warning));
    }
    saved.dcp = true;
    saved.last_file = absl::StrJoin(dcp->metadata().files, ", ");
    saved.source = std::move(dcp);
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(saved.source, ShardDirSource::Open(dir, staging_bytes));
    saved.last_file = kIndexFileName;
  }
  // The first entry of either identity is its index (index.json, the metadata); the rest data.
  saved.files = static_cast<int64_t>(saved.source->identity().size()) - 1;
  return saved;
}

}  // namespace shardkit::checkpoint
