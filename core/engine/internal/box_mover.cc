// The box mover's executor: a call's rounds are one PreparedTransfer (the plan's fingerprint in
// its agreement). Per round: local pieces copied tensor to tensor, strided sends packed into
// staging (or handed over as runs where the backend gathers), one round of the transfer, strided
// receives unpacked as they arrive; contiguous pieces move straight from and into tensor memory.
#include "core/engine/internal/box_mover.h"

#include <algorithm>
#include <optional>
#include <span>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/background_stage.h"
#include "core/base/check.h"
#include "core/base/quote.h"
#include "core/base/slot_pipe.h"
#include "core/base/status_macros.h"
#include "core/comm/prepared_transfer.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_merge.h"
#include "core/engine/internal/sync_tensors.h"

namespace shardkit::internal {
namespace {

// The pieces of `pieces` in round `round` (pieces are ordered by round).
std::span<const SyncPiece> InRound(const std::vector<SyncPiece>& pieces, int round) {
  auto by_round = [](const SyncPiece& p, int r) { return p.round < r; };
  auto first = std::lower_bound(pieces.begin(), pieces.end(), round, by_round);
  auto last = std::lower_bound(first, pieces.end(), round + 1, by_round);
  return {first, last};
}

// The coalesced pieces of a round, per peer (`peer_of` picks the piece's peer).
template <typename PeerOf>
CoalescedRuns Coalesce(std::span<const SyncPiece> pieces, int world, PeerOf peer_of) {
  CoalescedRuns runs{std::vector<int64_t>(world), std::vector<int64_t>(world)};
  for (const SyncPiece& p : pieces) {
    if (p.coalesced) runs.sizes[peer_of(p)] += p.bytes;
  }
  for (int r = 0; r < world; ++r) {
    runs.starts[r] = runs.end;
    runs.end += runs.sizes[r];
  }
  return runs;
}

absl::Status EnsureStaging(std::shared_ptr<Storage>& staging, int64_t bytes, const Device& device) {
  if (bytes == 0 || (staging != nullptr && staging->nbytes() >= static_cast<size_t>(bytes))) {
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(staging, Storage::Allocate(device, static_cast<size_t>(bytes)));
  return absl::OkStatus();
}

}  // namespace

MoverState& KeptState(SyncPlan& plan) {
  std::shared_ptr<MoverState>& state = SyncPlanAccess::mover_state(plan);
  if (state == nullptr) state = std::make_shared<MoverState>();
  return *state;
}

BoxMover::BoxMover(const SyncPlan& plan, MoverState& state, const Module* source,
                   Module* destination, Communicator& comm, std::string_view op)
    : plan_(plan),
      state_(state),
      comm_(comm),
      op_(op),
      sources_(plan, source, state.positions[0], "source"),
      destinations_(plan, destination, state.positions[1], "destination"),
      local_sources_(plan, source, state.positions[2], "source"),
      recvs_(comm.world_size()),
      gather_(PreparedTransfer::Gathers(comm)) {}

// Staging is allocated by the first call and reused by the next ones; one round packs into one
// send buffer only.
absl::Status BoxMover::Allocate() {
  const int64_t send = SendStagingBytes();
  const int64_t recv = SyncPlanAccess::staging_bytes(plan_, 1);
  const Device device = comm_.DefaultDevice();
  for (int slot = 0; slot < std::min(plan_.rounds(), 2); ++slot) {
    SHARDKIT_RETURN_IF_ERROR(
        Annotate(EnsureStaging(state_.send_staging[slot], send, device), "send wire staging"));
  }
  return Annotate(EnsureStaging(state_.recv_staging, recv, device), "receive wire staging");
}

absl::Status BoxMover::Ready() {
  if (!ready_.has_value()) {
    absl::Status status = Allocate();
    if (status.ok()) status = Resolve();
    ready_ = std::move(status);
  }
  return *ready_;
}

int64_t BoxMover::SendStagingBytes() const {
  if (!gather_) return SyncPlanAccess::staging_bytes(plan_, 0);
  int64_t most = 0;
  for (int round = 0; round < plan_.rounds(); ++round) {
    int64_t staged = 0;
    for (const SyncPiece& p : InRound(plan_.sends(), round)) {
      if (p.staged_send && !Gathers(p)) staged += p.bytes;
    }
    most = std::max(most, staged);
  }
  return most;
}

absl::Status BoxMover::Resolve() {
  auto check = [&](SideTensors& side, const SyncPiece& p, size_t shard) -> absl::Status {
    SHARDKIT_ASSIGN_OR_RETURN(SideTensors::Resolved t, side.Get(p.parameter, shard));
    if (BoxInside(t, p.box)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("parameter ", QuoteName(plan_.names()[p.parameter]), ": shard ", shard,
                     " of shape ", ShapeToString(t.tensor->shape()),
                     " does not hold the planned piece (not the module the plan was made with)"));
  };
  for (const SyncPiece& p : plan_.sends()) {
    SHARDKIT_RETURN_IF_ERROR(check(sources_, p, p.source_shard));
  }
  for (const SyncPiece& p : plan_.receives()) {
    SHARDKIT_RETURN_IF_ERROR(check(destinations_, p, p.destination_shard));
    if (p.from == p.to) SHARDKIT_RETURN_IF_ERROR(check(local_sources_, p, p.source_shard));
  }
  return absl::OkStatus();
}

void BoxMover::Pack(int round, int slot) {
  const absl::Time start = absl::Now();
  Packed& out = packed_[slot];
  out.status = absl::OkStatus();
  const std::span<const SyncPiece> pieces = InRound(plan_.sends(), round);
  CoalescedRuns runs =
      Coalesce(pieces, comm_.world_size(), [](const SyncPiece& p) { return p.to; });
  const std::shared_ptr<Storage>& staging = state_.send_staging[slot];
  out.sends.assign(comm_.world_size(), {});
  out.runs.clear();
  std::vector<Gathered> gathered;
  for (int r = 0; r < comm_.world_size(); ++r) {
    if (runs.sizes[r] > 0) {
      out.sends[r].emplace_back(staging->data() + runs.starts[r],
                                static_cast<size_t>(runs.sizes[r]), staging->device());
    }
  }
  int64_t at = runs.end;
  for (const SyncPiece& p : pieces) {
    absl::StatusOr<SideTensors::Resolved> from = sources_.Get(p.parameter, p.source_shard);
    if (!from.ok()) {
      out.status = from.status();
      break;
    }
    if (!p.staged_send) {
      out.sends[p.to].emplace_back(PieceStart(*from, p.box), static_cast<size_t>(p.bytes),
                                   from->tensor->device());
      continue;
    }
    if (Gathers(p)) {
      gathered.push_back({p.to, out.sends[p.to].size(), out.runs.size(), 0});
      PieceRuns(*from, p.box, out.runs);
      gathered.back().count = out.runs.size() - gathered.back().first;
      out.sends[p.to].emplace_back(nullptr, static_cast<size_t>(p.bytes), from->tensor->device());
      continue;
    }
    int64_t& offset = p.coalesced ? runs.starts[p.to] : at;
    out.status = CopyPiece(*from, p.box, staging->data() + offset, staging->device(), true);
    if (!out.status.ok()) break;
    if (!p.coalesced) {
      out.sends[p.to].emplace_back(staging->data() + offset, static_cast<size_t>(p.bytes),
                                   staging->device());
    }
    offset += p.bytes;
  }
  for (const Gathered& g : gathered) {  // out.runs no longer grows
    ConstBuffer& segment = out.sends[g.peer][g.segment];
    segment.runs = std::span<const HostRun>(out.runs).subspan(g.first, g.count);
    if (g.count > 0) segment.data = out.runs[g.first].data;
  }
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
}

absl::Status BoxMover::Post(const SyncPiece& p, SyncReport& report) {
  SHARDKIT_ASSIGN_OR_RETURN(SideTensors::Resolved to,
                            destinations_.Get(p.parameter, p.destination_shard));
  if (p.from == p.to) {  // overlapping groups: this rank's own source, tensor to tensor
    SHARDKIT_ASSIGN_OR_RETURN(SideTensors::Resolved from,
                              local_sources_.Get(p.parameter, p.source_shard));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor to_view, View(to, p.box));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor from_view, View(from, p.box));
    report.bytes_copied += p.bytes;
    return to_view.CopyFrom(from_view);
  }
  report.bytes_received += p.bytes;
  if (!p.staged_recv) {
    recvs_[p.from].emplace_back(PieceStart(to, p.box), static_cast<size_t>(p.bytes),
                                to.tensor->device());
    return absl::OkStatus();
  }
  const std::shared_ptr<Storage>& staging = state_.recv_staging;
  int64_t& offset = p.coalesced ? recv_runs_.starts[p.from] : recv_at_;
  // A coalesced piece comes in its peer's run, that peer's first segment.
  unpack_.push_back({p.from, p.coalesced ? 0 : recvs_[p.from].size(), &p, offset});
  if (!p.coalesced) {
    recvs_[p.from].emplace_back(staging->data() + offset, static_cast<size_t>(p.bytes),
                                staging->device());
  }
  offset += p.bytes;
  return absl::OkStatus();
}

absl::Status BoxMover::Unpack(int peer, size_t index, SyncReport& report) {
  const absl::Time start = absl::Now();
  const std::shared_ptr<Storage>& staging = state_.recv_staging;
  for (size_t& at = next_unpack_[peer];
       at < unpack_.size() && unpack_[at].peer == peer && unpack_[at].segment == index; ++at) {
    const Staged& u = unpack_[at];
    SHARDKIT_ASSIGN_OR_RETURN(SideTensors::Resolved to,
                              destinations_.Get(u.piece->parameter, u.piece->destination_shard));
    SHARDKIT_RETURN_IF_ERROR(
        CopyPiece(to, u.piece->box, staging->data() + u.offset, staging->device(), false));
  }
  report.unpack_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  return absl::OkStatus();
}

// Round `round`'s receives and local copies, then its exchange (its sends packed already), strided
// receives unpacked as they arrive. A local failure here (a device copy; on host memory nothing
// fails once Resolve passed) must not leave peers waiting: on a device each round is an
// AllToAllSegments, so this rank still takes part with nothing to move and the sizes' agreement
// fails everywhere; in a prepared transfer the round is refused and the communicator poisoned, so
// its peers fail at the deadline.
absl::Status BoxMover::Exchange(int round, const CallOptions& call, SyncReport& report) {
  for (auto& v : recvs_) v.clear();
  unpack_.clear();
  const std::span<const SyncPiece> pieces = InRound(plan_.receives(), round);
  recv_runs_ = Coalesce(pieces, comm_.world_size(), [](const SyncPiece& p) { return p.from; });
  recv_at_ = recv_runs_.end;
  if (const std::shared_ptr<Storage>& staging = state_.recv_staging) {
    for (int r = 0; r < comm_.world_size(); ++r) {
      if (recv_runs_.sizes[r] > 0) {
        recvs_[r].emplace_back(staging->data() + recv_runs_.starts[r],
                               static_cast<size_t>(recv_runs_.sizes[r]), staging->device());
      }
    }
  }
  Packed& packed = packed_[round % 2];
  absl::Status local = packed.status;
  const absl::Time start = absl::Now();
  for (const SyncPiece& p : pieces) {
    if (local.ok()) local = Post(p, report);
  }
  report.pack_seconds += packed.seconds + absl::ToDoubleSeconds(absl::Now() - start);
  if (!local.ok()) {
    for (auto& v : packed.sends) v.clear();
    for (auto& v : recvs_) v.clear();
  }
  // Strided receives are unpacked as they arrive, while later ones are still on the wire.
  std::stable_sort(unpack_.begin(), unpack_.end(), [](const Staged& a, const Staged& b) {
    return std::tie(a.peer, a.segment) < std::tie(b.peer, b.segment);
  });
  next_unpack_.assign(comm_.world_size(), unpack_.size());
  for (size_t i = unpack_.size(); i-- > 0;) next_unpack_[unpack_[i].peer] = i;
  auto arrived = [&](int peer, size_t index) { return Unpack(peer, index, report); };
  const Communicator::SegmentArrived unpack(arrived);  // `arrived` must be named
  const absl::Status moved =
      transfer_.has_value()
          ? transfer_->Run(round, packed.sends, recvs_, &unpack)
          : comm_.AllToAllSegments(packed.sends, recvs_, plan_.fingerprint_value(), call, &unpack);
  SHARDKIT_RETURN_IF_ERROR(local);
  return moved;
}

absl::Status BoxMover::Prepare(const CallOptions& call, bool local_ok) {
  const int world = comm_.world_size();
  std::vector<RoundShape> rounds;
  for (int r = 0; r < plan_.rounds(); ++r) {
    rounds.push_back(local_ok ? RoundSegments(plan_.sends(), plan_.receives(), r, world)
                              : RoundShape{std::vector<std::vector<uint64_t>>(world),
                                           std::vector<std::vector<uint64_t>>(world)});
  }
  SHARDKIT_ASSIGN_OR_RETURN(
      PreparedTransfer t,
      PreparedTransfer::Prepare(comm_, std::move(rounds), plan_.fingerprint_value(), call));
  transfer_.emplace(std::move(t));
  return absl::OkStatus();
}

absl::Status BoxMover::Run(const SyncCallOptions& options, const CallOptions& call,
                           SyncReport& report, std::vector<int64_t>& done) {
  packed_[0].status = Ready();
  if (packed_[0].status.ok()) Pack(0, 0);
  if (Prepared()) {
    const absl::Status local = packed_[0].status;
    const absl::Status prepared = Prepare(call, local.ok());
    if (!local.ok()) {
      // Prepared empty (nobody expected bytes from this rank): it still takes part in the rounds
      // and the close, so that no peer waits for it.
      if (prepared.ok()) (void)StandBy();
      return local;
    }
    SHARDKIT_RETURN_IF_ERROR(prepared);
  }
  // While round r is on the wire, round r + 1's sends are packed into the other slot: on the CPU
  // by a background stage; on a device on this thread after round r (a helper thread would act on
  // another CUDA device than the rank's).
  SlotPipe pipe(2);
  std::optional<BackgroundStage> packer;
  if (comm_.DefaultDevice().is_cpu() && plan_.rounds() > 1) {
    (void)pipe.AcquireFree();  // slot 0: round 0, packed above
    pipe.Publish(0, absl::OkStatus());
    packer.emplace(pipe, BackgroundStage::kProducer, plan_.rounds() - 1,
                   [this](int64_t k, size_t slot) {
                     Pack(static_cast<int>(k) + 1, static_cast<int>(slot));
                     return absl::OkStatus();  // a failed pack: its round's Exchange reports it
                   });
  }
  for (int r = 0; r < plan_.rounds(); ++r) {
    if (packer.has_value()) {
      const std::optional<SlotPipe::Filled> filled = pipe.WaitFilled();
      SHARDKIT_CHECK(filled.has_value() && filled->slot == static_cast<size_t>(r % 2));
    } else if (r > 0) {
      Pack(r, r % 2);
    }
    if (options.before_round_for_test) options.before_round_for_test(r);
    const absl::Status status = Exchange(r, call, report);
    if (packer.has_value()) pipe.Release(r % 2);
    SHARDKIT_RETURN_IF_ERROR(
        Annotate(status, absl::StrCat(std::string(op_), " round ", r + 1, " of ", plan_.rounds())));
    for (const SyncPiece& p : InRound(plan_.receives(), r)) ++done[p.parameter];
  }
  return transfer_.has_value() ? transfer_->Close() : absl::OkStatus();
}

absl::Status BoxMover::StandBy() {
  const std::vector<std::vector<ConstBuffer>> sends(comm_.world_size());
  const std::vector<std::vector<MutableBuffer>> recvs(comm_.world_size());
  for (size_t r = 0; r < transfer_->rounds(); ++r) {
    SHARDKIT_RETURN_IF_ERROR(transfer_->Run(r, sends, recvs));
  }
  return transfer_->Close();
}

}  // namespace shardkit::internal
