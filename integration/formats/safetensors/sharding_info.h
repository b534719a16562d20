// DCP_SHARDING_INFO: the __metadata__ key of a safetensors file that places each of its tensors in
// a larger one of the same name — what torch.distributed.checkpoint's HuggingFaceStorageWriter
// writes with save_distributed (and HuggingFaceStorageReader reads), and what shardkit's rank
// files carry for that reader (shard_dir/rank_files.h). Its value is a JSON object
// {tensor: {"saved_offsets": [offset per dimension]}}.
//
//   std::string json = ShardingInfoJson({{"w", {4, 0}}});  // {"w":{"saved_offsets":[4,0]}}
//   SHARDKIT_ASSIGN_OR_RETURN(auto offsets, ParseShardingInfo(json, "model.safetensors"));
#ifndef SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_SHARDING_INFO_H_
#define SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_SHARDING_INFO_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/tensor/shape.h"

namespace shardkit::safetensors {

inline constexpr char kDcpShardingInfoKey[] = "DCP_SHARDING_INFO";

// The JSON of `offsets`, keys sorted. Precondition: the names are valid UTF-8.
std::string ShardingInfoJson(const std::map<std::string, Shape>& offsets);

// Errors: kInvalidArgument naming `source` and what is wrong (not JSON, not an object, an entry
// without "saved_offsets", offsets that are not non-negative integers).
[[nodiscard]] absl::StatusOr<std::map<std::string, Shape>> ParseShardingInfo(
    std::string_view json, std::string_view source);

}  // namespace shardkit::safetensors

#endif  // SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_SHARDING_INFO_H_
