// Sync: one plan, many calls. Per round: local pieces copied tensor to tensor, strided sends packed
// into staging, one AllToAllSegments (the plan's fingerprint in its header), strided receives
// unpacked; contiguous pieces move straight from and into tensor memory.
#include <algorithm>
#include <span>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/sync_plan.h"
#include "nlohmann/json.hpp"
#include "specs/fingerprint.h"

namespace shardkit {
namespace {

using internal::SyncPlanAccess;

// The view of `box` in this rank's tensor of shard `shard` of parameter `name`.
absl::StatusOr<Tensor> PieceView(const Module& module, const std::string& name, size_t shard,
                                 const specs::Box& box) {
  SHARDKIT_ASSIGN_OR_RETURN(internal::SyncTensor t, internal::LocalSyncTensor(module, name, shard));
  specs::ShardMetadata rel{box.offsets, box.sizes};
  for (size_t d = 0; d < rel.offsets.size(); ++d) rel.offsets[d] -= t.offsets[d];
  return NarrowToShard(t.tensor, rel);
}

absl::StatusOr<Tensor> SourceView(const SyncPlan& plan, const Module* source, const SyncPiece& p) {
  if (source == nullptr) return absl::FailedPreconditionError("no source module on this rank");
  return PieceView(*source, plan.names()[p.parameter], p.source_shard, p.box);
}

absl::StatusOr<Tensor> DestinationView(const SyncPlan& plan, const Module* destination,
                                       const SyncPiece& p) {
  if (destination == nullptr) {
    return absl::FailedPreconditionError("no destination module on this rank");
  }
  return PieceView(*destination, plan.names()[p.parameter], p.destination_shard, p.box);
}

// The pieces of `pieces` in round `round` (pieces are ordered by round).
std::span<const SyncPiece> InRound(const std::vector<SyncPiece>& pieces, int round) {
  auto by_round = [](const SyncPiece& p, int r) { return p.round < r; };
  auto first = std::lower_bound(pieces.begin(), pieces.end(), round, by_round);
  auto last = std::lower_bound(first, pieces.end(), round + 1, by_round);
  return {first, last};
}

// The most this rank stages in one round, per direction.
std::pair<int64_t, int64_t> StagingNeeded(const SyncPlan& plan) {
  int64_t send = 0, recv = 0;
  for (int r = 0; r < plan.rounds(); ++r) {
    int64_t s = 0, v = 0;
    for (const SyncPiece& p : InRound(plan.sends(), r)) s += p.staged_send ? p.bytes : 0;
    for (const SyncPiece& p : InRound(plan.receives(), r)) v += p.staged_recv ? p.bytes : 0;
    send = std::max(send, s);
    recv = std::max(recv, v);
  }
  return {send, recv};
}

absl::Status EnsureStaging(std::shared_ptr<Storage>& staging, int64_t bytes, const Device& device) {
  if (bytes == 0 || (staging != nullptr && staging->nbytes() >= static_cast<size_t>(bytes))) {
    return absl::OkStatus();
  }
  SHARDKIT_ASSIGN_OR_RETURN(staging, Storage::Allocate(device, static_cast<size_t>(bytes)));
  return absl::OkStatus();
}

// The rounds of one call, pipelined: while round r is on the wire, a helper thread packs round
// r + 1's strided sends into the other of two staging buffers.
class Pipeline {
 public:
  Pipeline(SyncPlan& plan, const Module* source, Module* destination, Communicator& comm)
      : plan_(plan),
        source_(source),
        destination_(destination),
        comm_(comm),
        recvs_(comm.world_size()) {}

  // Runs every round; done[i] counts the receives of parameter i that completed.
  absl::Status Run(const CallOptions& call, SyncReport& report, std::vector<int64_t>& done);

 private:
  struct Packed {
    std::vector<std::vector<ConstBuffer>> sends;  // per peer
    absl::Status status;
    double seconds = 0;
  };

  absl::Status Allocate();
  void Pack(int round, int slot);
  absl::Status Post(const SyncPiece& p, SyncReport& report);
  absl::Status Unpack(SyncReport& report);
  absl::Status Exchange(int round, const CallOptions& call, SyncReport& report);

  SyncPlan& plan_;
  const Module* source_;
  Module* destination_;
  Communicator& comm_;
  Packed packed_[2];
  std::vector<std::vector<MutableBuffer>> recvs_;
  std::vector<std::pair<const SyncPiece*, int64_t>> unpack_;  // staged receives, staging offset
  int64_t recv_at_ = 0;
};

// Staging is allocated by the first call and reused by the next ones.
absl::Status Pipeline::Allocate() {
  const auto [send, recv] = StagingNeeded(plan_);
  const Device device = comm_.DefaultDevice();
  for (int slot = 0; slot < 2; ++slot) {
    SHARDKIT_RETURN_IF_ERROR(
        EnsureStaging(SyncPlanAccess::send_staging(plan_, slot), send, device));
  }
  return EnsureStaging(SyncPlanAccess::recv_staging(plan_), recv, device);
}

void Pipeline::Pack(int round, int slot) {
  const absl::Time start = absl::Now();
  Packed& out = packed_[slot];
  out.sends.assign(comm_.world_size(), {});
  out.status = absl::OkStatus();
  int64_t at = 0;
  for (const SyncPiece& p : InRound(plan_.sends(), round)) {
    absl::StatusOr<Tensor> from = SourceView(plan_, source_, p);
    if (!from.ok()) {
      out.status = from.status();
      break;
    }
    if (!p.staged_send) {
      out.sends[p.to].emplace_back(from->data(), static_cast<size_t>(p.bytes), from->device());
      continue;
    }
    const std::shared_ptr<Storage>& staging = SyncPlanAccess::send_staging(plan_, slot);
    std::byte* data = staging->data() + at;
    absl::StatusOr<Tensor> packed =
        internal::TensorOverBytes(data, p.box.sizes, from->dtype(), staging->device());
    out.status = packed.ok() ? packed->CopyFrom(*from) : packed.status();
    if (!out.status.ok()) break;
    out.sends[p.to].emplace_back(data, static_cast<size_t>(p.bytes), staging->device());
    at += p.bytes;
  }
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
}

absl::Status Pipeline::Post(const SyncPiece& p, SyncReport& report) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor to, DestinationView(plan_, destination_, p));
  if (p.from == p.to) {  // overlapping groups: this rank's own source
    SHARDKIT_ASSIGN_OR_RETURN(Tensor from, SourceView(plan_, source_, p));
    report.bytes_copied += p.bytes;
    return to.CopyFrom(from);
  }
  report.bytes_received += p.bytes;
  if (!p.staged_recv) {
    recvs_[p.from].emplace_back(to.data(), static_cast<size_t>(p.bytes), to.device());
    return absl::OkStatus();
  }
  const std::shared_ptr<Storage>& staging = SyncPlanAccess::recv_staging(plan_);
  recvs_[p.from].emplace_back(staging->data() + recv_at_, static_cast<size_t>(p.bytes),
                              staging->device());
  unpack_.emplace_back(&p, recv_at_);
  recv_at_ += p.bytes;
  return absl::OkStatus();
}

absl::Status Pipeline::Unpack(SyncReport& report) {
  const absl::Time start = absl::Now();
  const std::shared_ptr<Storage>& staging = SyncPlanAccess::recv_staging(plan_);
  for (const auto& [p, offset] : unpack_) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor to, DestinationView(plan_, destination_, *p));
    SHARDKIT_ASSIGN_OR_RETURN(
        Tensor packed, internal::TensorOverBytes(staging->data() + offset, p->box.sizes, to.dtype(),
                                                 staging->device()));
    SHARDKIT_RETURN_IF_ERROR(to.CopyFrom(packed));
  }
  report.unpack_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  return absl::OkStatus();
}

// Round `round`'s receives and local copies, then its exchange (its sends packed already). A
// local failure (staging memory, a module other than the planned one) must not leave peers
// waiting: this rank still takes part, with nothing to move, and the sizes' agreement fails
// everywhere.
absl::Status Pipeline::Exchange(int round, const CallOptions& call, SyncReport& report) {
  for (auto& v : recvs_) v.clear();
  unpack_.clear();
  recv_at_ = 0;
  Packed& packed = packed_[round % 2];
  absl::Status local = packed.status;
  const absl::Time start = absl::Now();
  for (const SyncPiece& p : InRound(plan_.receives(), round)) {
    if (local.ok()) local = Post(p, report);
  }
  report.pack_seconds += packed.seconds + absl::ToDoubleSeconds(absl::Now() - start);
  if (!local.ok()) {
    for (auto& v : packed.sends) v.clear();
    for (auto& v : recvs_) v.clear();
  }
  const absl::Status moved =
      comm_.AllToAllSegments(packed.sends, recvs_, plan_.fingerprint_value(), call);
  SHARDKIT_RETURN_IF_ERROR(local);
  return moved;
}

absl::Status Pipeline::Run(const CallOptions& call, SyncReport& report,
                           std::vector<int64_t>& done) {
  packed_[0].status = Allocate();
  if (packed_[0].status.ok()) Pack(0, 0);
  for (int r = 0; r < plan_.rounds(); ++r) {
    std::thread next;
    if (r + 1 < plan_.rounds()) next = std::thread([this, r] { Pack(r + 1, (r + 1) % 2); });
    absl::Status status = Exchange(r, call, report);
    if (next.joinable()) next.join();
    if (status.ok()) status = Unpack(report);
    SHARDKIT_RETURN_IF_ERROR(
        Annotate(status, absl::StrCat("Sync round ", r + 1, " of ", plan_.rounds())));
    for (const SyncPiece& p : InRound(plan_.receives(), r)) ++done[p.parameter];
  }
  return absl::OkStatus();
}

// The first 8 bytes of SHA-256 of the piece's bytes, as hex.
absl::StatusOr<std::string> Digest(const Tensor& view) {
  Tensor host = view;
  if (!view.device().is_cpu() || !view.IsContiguous()) {
    SHARDKIT_ASSIGN_OR_RETURN(host, view.Clone(Device::Cpu()));
  }
  const specs::Sha256Digest d =
      specs::Sha256(std::string_view(reinterpret_cast<const char*>(host.data()), host.nbytes()));
  return specs::FormatFingerprint(d).substr(7, 16);
}

// verify: every rank's digests of what it sent and received, all-gathered; every rank names the
// same first mismatch.
absl::Status Verify(const SyncPlan& plan, const Module* source, const Module* destination,
                    Communicator& comm, const CallOptions& call) {
  nlohmann::json sent = nlohmann::json::object(), received = nlohmann::json::array();
  for (const SyncPiece& p : plan.sends()) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor from, SourceView(plan, source, p));
    SHARDKIT_ASSIGN_OR_RETURN(sent[std::to_string(p.id)], Digest(from));
  }
  for (const SyncPiece& p : plan.receives()) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor to, DestinationView(plan, destination, p));
    SHARDKIT_ASSIGN_OR_RETURN(std::string got, Digest(to));
    if (p.from == p.to) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor from, SourceView(plan, source, p));
      SHARDKIT_ASSIGN_OR_RETURN(sent[std::to_string(p.id)], Digest(from));
    }
    received.push_back({p.id, got, p.parameter, p.from, p.to, p.box.offsets, p.box.sizes});
  }
  const std::string mine = nlohmann::json{{"sent", sent}, {"received", received}}.dump();
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(ConstBuffer(mine), call));
  std::vector<nlohmann::json> views;
  nlohmann::json senders = nlohmann::json::object();
  for (const std::string& text : all) {
    views.push_back(nlohmann::json::parse(text));
    senders.update(views.back()["sent"]);
  }
  std::vector<nlohmann::json> bad;
  for (const nlohmann::json& view : views) {
    for (const nlohmann::json& r : view["received"]) {
      if (senders.value(std::to_string(r[0].get<size_t>()), "") != r[1]) bad.push_back(r);
    }
  }
  if (bad.empty()) return absl::OkStatus();
  std::sort(bad.begin(), bad.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  const nlohmann::json& r = bad.front();
  return absl::DataLossError(absl::StrCat(
      "Sync verify: parameter ", QuoteName(plan.names()[r[2].get<size_t>()]), " piece at ",
      r[5].dump(), " of ", r[6].dump(), " from rank ", r[3].dump(), " to rank ", r[4].dump(),
      ": the sender's digest is ", senders.value(std::to_string(r[0].get<size_t>()), "?"),
      ", the receiver's ", r[1].get<std::string>(), " (", bad.size(), " of ", plan.total_pieces(),
      " pieces differ)"));
}

void ReportUpdated(const SyncPlan& plan, const Module* destination,
                   const std::vector<int64_t>& done, SyncReport& report) {
  report.updated.clear();
  if (destination == nullptr) return;
  const std::vector<int64_t>& expected = SyncPlanAccess::receives_per_parameter(plan);
  for (size_t i = 0; i < plan.names().size(); ++i) {
    if (done[i] == expected[i]) report.updated.push_back(plan.names()[i]);
  }
}

}  // namespace

absl::Status Sync(SyncPlan& plan, const Module* source, Module* destination, Communicator& comm,
                  const SyncCallOptions& options, SyncReport* report_out) {
  CallOptions call = options.call;
  call.deadline = comm.Deadline(call);
  SyncReport report;
  std::vector<int64_t> done(plan.names().size(), 0);
  absl::Status status = Pipeline(plan, source, destination, comm).Run(call, report, done);
  ReportUpdated(plan, destination, done, report);
  if (status.ok() && options.after_move_for_test) options.after_move_for_test();
  if (status.ok() && options.verify) status = Verify(plan, source, destination, comm, call);
  if (report_out != nullptr) *report_out = std::move(report);
  return status;
}

}  // namespace shardkit
