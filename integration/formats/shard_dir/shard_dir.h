// The shard directory written by `shardkit shard` and read by `gather` and `inspect`
// (docs/architecture.md, "The shard directory"):
//
//   DIR/rank-00000.safetensors ... one file per rank, even when empty (header {})
//   DIR/index.json             written last, by the source rank, after the commit
//   DIR/.shardkit.lock         locked by the source for the run (os::DirectoryLock), then removed
//
// A rank's file holds every shard placed on it, zero-size shards included, named after the
// parameter — or NAME#K (K = the shard's index in the parameter's shard list) when the rank holds
// two or more shards of that parameter. Replicated parameters are whole in every file. Every
// file's __metadata__ is index.json's "metadata" with DCP_SHARDING_INFO, the offsets of the
// file's tensors, set for torch's HuggingFaceStorageReader (rank_files.h: RankFileMetadata).
//
//   IndexParameter entry = MakeIndexParameter("w", DType::kFloat32, {10, 8}, layout);
//   SHARDKIT_RETURN_IF_ERROR(WriteIndex("out", index));          // the source, last
//   SHARDKIT_ASSIGN_OR_RETURN(ShardIndex read, ReadIndex("out"));  // validated
#ifndef SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_H_
#define SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/files.h"
#include "core/tensor/tensor.h"
#include "specs/parameter_layout.h"
#include "specs/plan.h"
#include "specs/shard_metadata.h"

namespace shardkit::shard_dir {

inline constexpr char kIndexFileName[] = "index.json";
inline constexpr char kIndexFormat[] = "shardkit-shards";

// "rank-00003.safetensors" (5-digit rank).
std::string RankFileName(int64_t rank);

// The tensor name of each shard of parameter `name` in its holder's file: `name`, or "name#index"
// (index: the shard's in `shards`) when that rank holds two or more of `shards` (zero-size ones
// counted). Linear in the number of shards.
std::vector<std::string> ShardTensorNames(std::string_view name,
                                          const std::vector<specs::ShardMetadata>& shards);

// Errors: kInvalidArgument if `name` contains '#' (reserved for NAME#K).
[[nodiscard]] absl::Status CheckNoShardSuffix(std::string_view name);

// The rank R of a rank file's name "rank-RRRRR.safetensors" (at least 5 digits), else -1.
int64_t RankOfFileName(std::string_view name);

// A new output directory must not be the shard directory a run reads, nor inside it (paths
// compared once made absolute and normal, symlinks resolved where they exist).
// Errors: kInvalidArgument naming both.
[[nodiscard]] absl::Status CheckOutsideInput(const std::string& in_dir, const std::string& out_dir);

struct IndexShard {
  specs::ShardMetadata metadata;  // placement: rank only
  std::string file;               // relative to the directory
  std::string tensor;
};

struct IndexParameter {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::optional<specs::ShardingSpec> spec;  // bound; nullopt: replicated
  std::string spec_json;                    // bound canonical JSON, or specs::kReplicatedJson
  std::string fingerprint;
  std::vector<IndexShard> shards;  // in the spec's order
};

// Which program wrote a shard directory, as index.json's "strategy" records it: `shardkit shard`
// with its plan's strategy (how the data moved: "scatter", "broadcast", "direct"), `shardkit
// reshard` ("reshard": every rank read its new shards from an earlier shard directory) or
// checkpoint::SaveShards ("save": every rank wrote the shards it held).
enum class WrittenBy { kShardScatter, kShardBroadcast, kShardDirect, kReshard, kSave };

// `shardkit shard` under `strategy`.
WrittenBy WrittenByShard(specs::Strategy strategy);
// index.json's string: "scatter" / "broadcast" / "direct" / "reshard" / "save".
std::string_view WrittenByName(WrittenBy written_by);
// Errors: kInvalidArgument naming the string.
[[nodiscard]] absl::StatusOr<WrittenBy> ParseWrittenBy(std::string_view name);

struct ShardIndex {
  int64_t world_size = 1;
  int64_t src_rank = 0;
  WrittenBy written_by = WrittenBy::kShardScatter;  // index.json's "strategy"
  std::map<std::string, std::string> metadata;      // the checkpoint's __metadata__
  std::vector<IndexParameter> parameters;           // sorted by name
};

// The index entry of a parameter laid out as `layout` (files and tensor names filled in).
IndexParameter MakeIndexParameter(std::string name, DType dtype, Shape shape,
                                  const specs::ParameterLayout& layout);

// index.json's text (keys in the documented order, one parameter per line).
std::string IndexToJson(const ShardIndex& index);

// Parses and validates index.json: the schema (unknown keys are errors), and every parameter's
// consistency — its spec laid out on its shape and world size gives exactly the listed shards
// (which must tile the tensor: ValidateTiling), the fingerprint matches, files and tensor names
// follow the naming rules. `source` names the file in messages.
// Errors: kInvalidArgument naming the JSON path, e.g. `parameters["w"].shards[1].sizes: ...`.
[[nodiscard]] absl::StatusOr<ShardIndex> ParseIndex(std::string_view text, std::string_view source);

// Reads DIR/index.json. Errors: kNotFound if it is missing; as ParseIndex.
[[nodiscard]] absl::StatusOr<ShardIndex> ReadIndex(const std::string& dir);

// Writes DIR/index.json atomically. Errors: as os::WriteFileAtomically.
[[nodiscard]] absl::Status WriteIndex(const std::string& dir, const ShardIndex& index);

}  // namespace shardkit::shard_dir

#endif  // SHARDKIT_INTEGRATION_FORMATS_SHARD_DIR_SHARD_DIR_H_
