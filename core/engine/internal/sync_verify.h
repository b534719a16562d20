// Internal: Sync's verify (core/engine/sync.h, SyncCallOptions::verify): a SHA-256 digest of
// every piece on its sender and its receiver, compared on every rank.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_VERIFY_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_VERIFY_H_

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "core/engine/internal/box_mover.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"

namespace shardkit::internal {

// Every rank's digests of what it sent and received, all-gathered; every rank names the same first
// mismatch (kDataLoss), or the first rank that could not compute its digests
// (kFailedPrecondition). Collective over `comm`.
absl::Status VerifySync(const SyncPlan& plan, MoverState& state, const Module* source,
                        const Module* destination, Communicator& comm, const CallOptions& call);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_SYNC_VERIFY_H_
