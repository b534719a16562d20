// ShardDirOutput: a shard directory as an output (formats/output_file/output_writer.h).
// Its rules: its files are index.json and the rank files (shard_dir.h); it is complete once
// index.json is there (written last: the commit), and it is shardkit's only if that index.json
// begins as a shardkit shard index ({"format": "shardkit-shards"}).
// Its files: rank R writes rank-RRRRR.safetensors, holding every replicated tensor whole and every
// shard placed on R (zero-size ones included), in the stream's order, named by ShardTensorNames,
// with the checkpoint's __metadata__ and DCP_SHARDING_INFO (RankFileMetadata, rank_files.h) so
// that torch's HuggingFaceStorageReader can load the directory; the source writes index.json.
#ifndef SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_OUTPUT_H_
#define SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_OUTPUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "integration/formats/output_file/output_writer.h"

namespace shardkit::shard_dir {

class ShardDirOutput : public formats::OutputWriter {
 public:
  bool IsOutputFile(std::string_view name) const override;
  // Errors: kInvalidArgument if DIR's index.json cannot be read or is not a shardkit shard index.
  absl::StatusOr<bool> Examine(const std::string& dir,
                               const std::vector<std::string>& names) const override;
  std::string_view last_file_name() const override;

  std::string_view format_name() const override { return "shardkit"; }
  std::string_view description() const override { return "a shard directory"; }
  std::string RankFileName(int rank) const override;
  // Errors: as safetensors::PlanFile and os::AtomicFile (Create, Write, Resize), naming the file.
  absl::Status CreateRankFile(const std::string& dir, int rank,
                              const formats::OutputContent& content,
                              formats::RankFile& file) const override;
  std::vector<int64_t> RankFileTensors(const formats::OutputContent& content) const override;
  // index.json. Errors: kInvalidArgument for an unknown written_by; as WriteIndex.
  absl::Status WriteLastFile(const std::string& dir,
                             const formats::OutputContent& content) const override;
};

}  // namespace shardkit::shard_dir

#endif  // SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_OUTPUT_H_
