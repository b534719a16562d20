#include "integration/checkpoint/source/saved_directory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/dcp_source.h"
#include "integration/checkpoint/source/hf_sharded_source.h"
#include "integration/checkpoint/source/shard_dir_source.h"
#include "integration/formats/dcp/dcp_files.h"
#include "integration/formats/dcp/metadata.h"

namespace shardkit::checkpoint {

bool IsDcpSaved(const std::string& dir) {
  return dcp::IsDcpDirectory(dir) || HfShardedSource::Holds(dir);
}

absl::StatusOr<SavedDirectory> OpenSavedDirectory(const std::string& dir, int64_t staging_bytes) {
  SavedDirectory saved;
  int64_t index_files = 1;  // the first entries of its identity that are no data files
  if (dcp::IsDcpDirectory(dir)) {
    SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<DcpSource> dcp, DcpSource::Open(dir, staging_bytes));
    saved.dcp_source = dcp.get();
    saved.dcp = true;
    saved.files_kind = ".distcp files";
    saved.last_file = absl::StrJoin(dcp->metadata().files, ", ");
    saved.source = std::move(dcp);
  } else if (HfShardedSource::Holds(dir)) {
    SHARDKIT_ASSIGN_OR_RETURN(saved.source, HfShardedSource::Open(dir, staging_bytes));
    saved.dcp = true;
    saved.files_kind = "safetensors files";
    saved.last_file = absl::StrCat("the safetensors files of ", dir);
    index_files = 0;
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(saved.source, ShardDirSource::Open(dir, staging_bytes));
    saved.files_kind = "rank files";
    saved.last_file = kIndexFileName;
  }
  saved.files = static_cast<int64_t>(saved.source->identity().size()) - index_files;
  return saved;
}

absl::StatusOr<std::unique_ptr<TensorSource>> SelectSaved(SavedDirectory& saved,
                                                          const TensorSelection& select,
                                                          bool items_carried,
                                                          std::vector<std::string>* warnings) {
  std::vector<std::string> items;
  if (saved.dcp_source != nullptr) {
    items = saved.dcp_source->skipped();
    std::string dropped =
        items_carried ? "" : saved.dcp_source->SkippedWarning([&](const std::string& key) {
          return select.Picks(key);
        });
    if (!dropped.empty()) warnings->push_back(std::move(dropped));
  }
  return SelectTensors(std::move(saved.source), select, items, warnings);
}

absl::StatusOr<ShardIndex> ReadSavedIndex(const std::string& dir) {
  absl::StatusOr<ShardIndex> index = ReadIndex(dir);
  if (absl::IsNotFound(index.status())) {
    if (std::string unfinished = dcp::UnfinishedSave(dir); !unfinished.empty()) {
      return absl::NotFoundError(unfinished);
    }
  }
  return index;
}

}  // namespace shardkit::checkpoint
