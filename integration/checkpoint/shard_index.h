// The shard directory's index and rank files (integration/formats/shard_dir, namespace
// shardkit::shard_dir) under the names the checkpoint library gives them: its calls and reports
// speak of checkpoint::ShardIndex, checkpoint::WrittenBy, checkpoint::ReadIndex, ... as they did
// before the format had a namespace of its own.
//
//   SHARDKIT_ASSIGN_OR_RETURN(checkpoint::ShardIndex index, checkpoint::ReadIndex(dir));
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_INDEX_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_INDEX_H_

#include "integration/formats/shard_dir/rank_files.h"
#include "integration/formats/shard_dir/shard_dir.h"

namespace shardkit::checkpoint {

using shard_dir::CheckNoShardSuffix;
using shard_dir::CheckOutsideInput;
using shard_dir::FindShard;
using shard_dir::IndexParameter;
using shard_dir::IndexShard;
using shard_dir::IndexToJson;
using shard_dir::kIndexFileName;
using shard_dir::kIndexFormat;
using shard_dir::MakeIndexParameter;
using shard_dir::OpenRankFiles;
using shard_dir::ParseIndex;
using shard_dir::ParseWrittenBy;
using shard_dir::RankFileMetadata;
using shard_dir::RankFileName;
using shard_dir::RankOfFileName;
using shard_dir::ReadIndex;
using shard_dir::ShardIndex;
using shard_dir::ShardTensorNames;
using shard_dir::VerifyShards;
using shard_dir::WriteIndex;
using shard_dir::WrittenBy;
using shard_dir::WrittenByName;
using shard_dir::WrittenByShard;

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SHARD_INDEX_H_
