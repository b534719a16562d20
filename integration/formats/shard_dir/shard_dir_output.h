// ShardDirOutput: a shard directory's rules as an output (formats/output_file/output_kind.h) —
// its files are index.json and the rank files (shard_dir.h); it is complete once index.json is
// there (written last: the commit), and it is shardkit's only if that index.json begins as a
// shardkit shard index ({"format": "shardkit-shards"}).
#ifndef SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_OUTPUT_H_
#define SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_OUTPUT_H_

#include <string>
#include <string_view>
#include <vector>

#include "integration/formats/output_file/output_kind.h"

namespace shardkit::checkpoint {

class ShardDirOutput : public formats::OutputKind {
 public:
  bool IsOutputFile(std::string_view name) const override;
  // Errors: kInvalidArgument if DIR's index.json cannot be read or is not a shardkit shard index.
  absl::StatusOr<bool> Examine(const std::string& dir,
                               const std::vector<std::string>& names) const override;
  std::string_view last_file_name() const override;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_OUTPUT_H_
