// AgreeOnCheckpoint: before every rank reads its own shards of a checkpoint (`shardkit shard
// --strategy direct`), the ranks check that they all see the same checkpoint — the same files,
// each of the same size and with the same header bytes (SHA-256; an index: all of its bytes) — so
// that no rank writes shards of another file than the source's.
//
//   absl::StatusOr<const TensorSource*> mine = &source;  // or why it could not be opened
//   SHARDKIT_RETURN_IF_ERROR(AgreeOnCheckpoint(comm, mine, path, src_rank, call));
//
// One all-gather of every rank's file list (or error); every rank computes the verdict from the
// same bytes, so every rank returns the same Status.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_CHECKPOINT_IDENTITY_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_CHECKPOINT_IDENTITY_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "integration/checkpoint/source/tensor_source.h"

namespace shardkit::checkpoint {

// Collective over `comm`. `mine`: this rank's open checkpoint, or why opening `path` failed;
// `what` names it in messages ("checkpoint", "shard directory"; "DCP checkpoint" whenever the
// source rank opened one: DcpSource's identity begins with its metadata).
// Errors (the same on every rank): kInvalidArgument "checking that every rank sees the same
// checkpoint: …" listing each rank that could not open it (with its path and reason) and each
// rank whose files differ from `src_rank`'s (naming the file and the size or header digest on
// both ranks); transport errors as AllGather's.
[[nodiscard]] absl::Status AgreeOnCheckpoint(Communicator& comm,
                                             const absl::StatusOr<const TensorSource*>& mine,
                                             std::string_view path, int src_rank,
                                             const CallOptions& call,
                                             std::string_view what = "checkpoint");

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_CHECKPOINT_IDENTITY_H_
