// Internal: the box mover's executor — one plan's rounds run between two modules (weight sync:
// core/engine/sync.h; Reshard: core/engine/reshard.h, the same group on both sides). The plan
// (SyncPlan: rounds and this rank's pieces, built by the one planner, internal/sync_walk.h) is
// never changed here; what the executor reuses from call to call (staging, where each parameter
// sits in the modules) lives in a MoverState beside it.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_BOX_MOVER_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_BOX_MOVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "core/comm/prepared_transfer.h"
#include "core/engine/internal/sync_merge.h"
#include "core/engine/internal/sync_tensors.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"

namespace shardkit::internal {

// What an executor keeps between calls of one plan: staging (two send buffers, packed in turn;
// one receive buffer), allocated by the first call, and where each parameter was found last time
// in the source module by the packer (0), in the destination module (1), in the source module by
// the caller's thread (2). Used by one call at a time.
struct MoverState {
  std::shared_ptr<Storage> send_staging[2];
  std::shared_ptr<Storage> recv_staging;
  std::vector<size_t> positions[3];
};

// The state kept with `plan` for its calls (internal::SyncPlanAccess), made on first use.
MoverState& KeptState(SyncPlan& plan);

// The coalesced pieces of a round, per peer: each peer's run starts at starts[peer] in staging,
// back to back by peer; `end` is where the runs end (the other staged pieces follow).
struct CoalescedRuns {
  std::vector<int64_t> starts, sizes;
  int64_t end = 0;
};

// The rounds of one call, pipelined: while round r is on the wire, a helper thread packs round
// r + 1's strided sends into the other of two staging buffers. `op` names the call in errors
// ("Sync round 2 of 5").
class BoxMover {
 public:
  BoxMover(const SyncPlan& plan, MoverState& state, const Module* source, Module* destination,
           Communicator& comm, std::string_view op);

  // This rank's part before any byte moves: staging allocated (kept in the state), every piece's
  // tensor resolved and checked. Run calls it; a caller that must turn a local failure into every
  // rank's error first (Reshard's status round) calls it before. Errors: Storage::Allocate's
  // (annotated "send wire staging" or "receive wire staging"); kFailedPrecondition naming the
  // parameter when a module lacks a planned tensor or shard, or a shard does not hold its piece.
  absl::Status Ready();

  // Runs every round; done[i] counts the receives of parameter i that completed. Collective over
  // `comm`: a rank whose Ready failed still takes part (moving nothing), so that no peer waits.
  absl::Status Run(const SyncCallOptions& options, const CallOptions& call, SyncReport& report,
                   std::vector<int64_t>& done);

 private:
  struct Packed {
    std::vector<std::vector<ConstBuffer>> sends;  // per peer
    std::vector<HostRun> runs;                    // of the gathered sends, reused by every call
    absl::Status status;
    double seconds = 0;
  };
  // A strided send handed to the backend as runs: sends[peer][segment] gathers `count` of them
  // from `first`.
  struct Gathered {
    int peer;
    size_t segment, first, count;
  };
  // A staged receive: the piece, where it is in staging, the segment it comes in (its index in
  // recvs_[peer]).
  struct Staged {
    int peer;
    size_t segment;
    const SyncPiece* piece;
    int64_t offset;
  };

  absl::Status Allocate();
  // Resolves every tensor of the call's pieces, so that a module other than the planned one fails
  // the transfer's preparation on every rank, not a round (which has no agreement).
  absl::Status Resolve();
  // Whether the rounds are one PreparedTransfer, agreed once and closed once: in host memory
  // nothing can fail locally once Resolve passed. On a device (a pack can fail) each round is an
  // AllToAllSegments of its own. The same on every rank (the backend's default device).
  bool Prepared() const { return comm_.DefaultDevice().is_cpu(); }
  // Prepares the call's rounds (their shapes from the plan; with a local failure, empty rounds,
  // which fail the preparation on every rank if this one had bytes to move with any).
  absl::Status Prepare(const CallOptions& call, bool local_ok);
  // A rank whose part failed before the rounds, prepared empty: runs the rounds moving nothing,
  // then closes.
  absl::Status StandBy();
  // The most send staging one round needs: with gathering, only for the pieces not gathered.
  int64_t SendStagingBytes() const;
  void Pack(int round, int slot);
  // Whether strided piece `p` is sent as runs rather than packed (host memory: a backend that
  // gathers moves nothing else, which the planner's caller checked).
  bool Gathers(const SyncPiece& p) const { return SentGathered(p, gather_); }
  absl::Status Post(const SyncPiece& p, SyncReport& report);
  // Unpacks the staged receives of segment `index` from `peer`, which has just arrived.
  absl::Status Unpack(int peer, size_t index, SyncReport& report);
  absl::Status Exchange(int round, const CallOptions& call, SyncReport& report);

  const SyncPlan& plan_;
  MoverState& state_;
  std::optional<PreparedTransfer> transfer_;  // Prepared()
  Communicator& comm_;
  const std::string_view op_;
  std::optional<absl::Status> ready_;  // Ready()'s result, once called
  SideTensors sources_;                // the packer's
  SideTensors destinations_;           // the caller's thread's
  SideTensors local_sources_;          // the caller's thread's: local pieces (overlapping groups)
  Packed packed_[2];
  std::vector<std::vector<MutableBuffer>> recvs_;
  std::vector<Staged> unpack_;       // by peer, then segment, once posted
  std::vector<size_t> next_unpack_;  // per peer: its next entry in unpack_
  CoalescedRuns recv_runs_;
  int64_t recv_at_ = 0;
  const bool gather_;  // the backend takes gathered sends
};

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_BOX_MOVER_H_
