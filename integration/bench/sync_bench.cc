#include "integration/bench/sync_bench.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/comm/prepared_transfer.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"
#include "core/os/proc_status.h"
#include "integration/bench/bench_util.h"
#include "specs/layout.h"
#include "specs/spec_json.h"

namespace shardkit::bench {
namespace {

constexpr int64_t kRowBytes = 4096;

int64_t SourceCount(const SyncBenchOptions& o, int world) {
  return o.sources > 0 ? o.sources : std::max(1, world / 2);
}

SyncGroups GroupsOf(const SyncBenchOptions& o, int world) {
  SyncGroups g;
  const int sources = static_cast<int>(SourceCount(o, world));
  for (int r = 0; r < sources; ++r) g.source.push_back(r);
  for (int r = o.same_ranks ? 0 : sources; r < (o.same_ranks ? sources : world); ++r) {
    g.destination.push_back(r);
  }
  return g;
}

// Rows of every parameter: `mib` MiB in all, evenly or in units cycling 1..12.
std::vector<int64_t> Rows(const SyncBenchOptions& o) {
  std::vector<int64_t> weights(o.params, 1);
  if (o.varied) {
    for (int64_t i = 0; i < o.params; ++i) weights[i] = i % 12 + 1;
  }
  int64_t units = 0;
  for (int64_t w : weights) units += w;
  const int64_t unit = std::max<int64_t>(1, (o.mib << 20) / kRowBytes / units);
  for (int64_t& w : weights) w *= unit;
  return weights;
}

// This group rank's side: its chunks (on `dim` over `group_size` ranks) of every parameter, as
// zero-filled (so touched) tensors on `device`.
absl::StatusOr<Module> MakeSide(const SyncBenchOptions& o, int64_t dim, int group_rank,
                                int group_size, const Device& device) {
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec spec,
                            specs::ParseSpec(absl::StrCat(R"({"type": "chunk", "dim": )", dim,
                                                          R"(, "placements": {"ranks": "all"}})")));
  const int64_t cols = kRowBytes / static_cast<int64_t>(ElementSize(o.dtype));
  const std::vector<int64_t> rows = Rows(o);
  Module module;
  for (size_t i = 0; i < rows.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(
        ShardedTensor st,
        ShardedTensor::Zeros({rows[i], cols}, o.dtype, spec, group_size, group_rank, device));
    const std::string name = absl::StrCat("layers.", i, ".weight");
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(name, Tensor()));
    SHARDKIT_RETURN_IF_ERROR(module.SetSharded(name, std::move(st)));
  }
  return module;
}

int IndexIn(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

// The raw baseline's buffers: per peer, one contiguous buffer of what the plan moves.
struct Raw {
  std::shared_ptr<Storage> send, recv;
  std::vector<ConstBuffer> sends;
  std::vector<MutableBuffer> recvs;
};

absl::StatusOr<Raw> MakeRaw(const SyncPlan& plan, int world, int me, const Device& device) {
  std::vector<int64_t> out(world), in(world);
  for (const SyncPiece& p : plan.sends()) out[p.to] += p.bytes;
  for (const SyncPiece& p : plan.receives()) {
    if (p.from != me) in[p.from] += p.bytes;
  }
  int64_t out_total = 0, in_total = 0;
  for (int r = 0; r < world; ++r) out_total += out[r], in_total += in[r];
  Raw raw;
  SHARDKIT_ASSIGN_OR_RETURN(raw.send, TouchedStorage(device, std::max<int64_t>(out_total, 1)));
  SHARDKIT_ASSIGN_OR_RETURN(raw.recv, TouchedStorage(device, std::max<int64_t>(in_total, 1)));
  int64_t out_at = 0, in_at = 0;
  for (int r = 0; r < world; ++r) {
    raw.sends.emplace_back(raw.send->data() + out_at, static_cast<size_t>(out[r]), device);
    raw.recvs.emplace_back(raw.recv->data() + in_at, static_cast<size_t>(in[r]), device);
    out_at += out[r];
    in_at += in[r];
  }
  return raw;
}

// Seconds of `fn` between two Barriers.
template <typename Fn>
absl::StatusOr<double> Timed(Communicator& comm, const CallOptions& call, Fn fn) {
  SHARDKIT_RETURN_IF_ERROR(comm.Barrier(call));
  const absl::Time start = absl::Now();
  SHARDKIT_RETURN_IF_ERROR(fn());
  SHARDKIT_RETURN_IF_ERROR(comm.Barrier(call));
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

absl::Status ValidateSyncBenchOptions(const SyncBenchOptions& o, int world) {
  if (o.mib < 1 || o.params < 1 || o.repeats < 1 || o.budget_mib < 1) {
    return absl::InvalidArgumentError("--mib, --params, --repeats and --budget-mib must be >= 1");
  }
  if (o.from_dim < 0 || o.from_dim > 1 || o.to_dim < 0 || o.to_dim > 1) {
    return absl::InvalidArgumentError("--from-dim and --to-dim must be 0 or 1");
  }
  const int64_t sources = SourceCount(o, world);
  if (!o.same_ranks && sources >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sources ", sources, " leaves no destination rank in a world of ", world,
                     " (add --same-ranks to sync within the same ranks)"));
  }
  if (sources > world) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sources ", sources, " exceeds the world of ", world));
  }
  return absl::OkStatus();
}

std::string SyncBenchResult::ToJson() const {
  return absl::StrCat(
      "{\"rank\":", rank, ",\"world\":", world, ",\"mib\":", mib,
      ",\"strategy\":\"sync\",\"median_s\":", median_s, ",\"min_s\":", min_s,
      ",\"baseline_rss_mib\":", baseline_rss_mib, ",\"peak_rss_mib\":", peak_rss_mib,
      ",\"bytes_sent\":", bytes_sent, ",\"bytes_received\":", bytes_received, ",\"device\":\"",
      device, "\",\"sync_role\":\"", role, "\",\"sync_plan_s\":", plan_s,
      ",\"sync_first_call_s\":", first_call_s, ",\"sync_raw_median_s\":", raw_median_s,
      ",\"sync_pack_median_s\":", pack_median_s, ",\"sync_unpack_median_s\":", unpack_median_s,
      ",\"sync_recv_mib_per_s\":", recv_mib_per_s, ",\"sync_rounds\":", rounds,
      ",\"sync_pieces\":", pieces, ",\"sync_tensors_mib\":", tensors_mib,
      ",\"sync_raw_segments_median_s\":", raw_segments_median_s, "}");
}

absl::StatusOr<SyncBenchResult> RunSyncBench(Communicator& comm, const SyncBenchOptions& o) {
  const int world = comm.world_size(), me = comm.rank();
  SHARDKIT_RETURN_IF_ERROR(ValidateSyncBenchOptions(o, world));
  SyncBenchResult r{.rank = me, .world = world, .mib = o.mib};
  os::ResetPeakRss().IgnoreError();
  r.baseline_rss_mib = StatusFieldMiB("VmRSS");
  const Device device = comm.DefaultDevice();
  r.device = device.ToString();
  const SyncGroups groups = GroupsOf(o, world);
  const int si = IndexIn(groups.source, me), di = IndexIn(groups.destination, me);
  r.role = si >= 0 && di >= 0 ? "both" : si >= 0 ? "source" : "destination";
  std::optional<Module> source, destination;
  if (si >= 0) {
    SHARDKIT_ASSIGN_OR_RETURN(
        source, MakeSide(o, o.from_dim, si, static_cast<int>(groups.source.size()), device));
  }
  if (di >= 0) {
    SHARDKIT_ASSIGN_OR_RETURN(
        destination,
        MakeSide(o, o.to_dim, di, static_cast<int>(groups.destination.size()), device));
  }
  const Module* src = source ? &*source : nullptr;
  Module* dst = destination ? &*destination : nullptr;
  SHARDKIT_ASSIGN_OR_RETURN(
      SyncPlan plan,
      PlanSync(src, dst, groups, comm, {.memory_bytes = o.budget_mib << 20, .call = o.call}));
  r.plan_s = absl::ToDoubleSeconds(plan.planning_time());
  r.rounds = plan.rounds();
  r.pieces = static_cast<int64_t>(plan.pieces());
  SyncReport report;
  SHARDKIT_ASSIGN_OR_RETURN(r.first_call_s, Timed(comm, o.call, [&] {
                              return Sync(plan, src, dst, comm, {.call = o.call}, &report);
                            }));
  std::vector<double> seconds, pack, unpack, raw_seconds, segment_seconds;
  auto timed_sync = [&]() -> absl::Status {
    SHARDKIT_ASSIGN_OR_RETURN(double s, Timed(comm, o.call, [&] {
                                return Sync(plan, src, dst, comm, {.call = o.call}, &report);
                              }));
    seconds.push_back(s);
    pack.push_back(report.pack_seconds);
    unpack.push_back(report.unpack_seconds);
    return absl::OkStatus();
  };
  SHARDKIT_RETURN_IF_ERROR(timed_sync());
  r.bytes_received = report.bytes_received;
  for (const SyncPiece& p : plan.sends()) r.bytes_sent += p.bytes;
  r.peak_rss_mib = StatusFieldMiB("VmHWM");  // before the baseline's buffers exist
  for (const Module* m : {static_cast<const Module*>(src), static_cast<const Module*>(dst)}) {
    if (m == nullptr) continue;
    for (const std::string& name : m->names()) {
      r.tensors_mib += static_cast<double>((*m->GetSharded(name))->local_nbytes()) / (1 << 20);
    }
  }
  SHARDKIT_ASSIGN_OR_RETURN(Raw raw, MakeRaw(plan, world, me, device));
  // The same buffers again as the round of a prepared transfer (Gloo: over the payload mesh), the
  // path Sync's payload takes, without the agreement.
  std::vector<std::vector<ConstBuffer>> segment_sends(world);
  std::vector<std::vector<MutableBuffer>> segment_recvs(world);
  for (int peer = 0; peer < world; ++peer) {
    segment_sends[peer].push_back(raw.sends[peer]);
    segment_recvs[peer].push_back(raw.recvs[peer]);
  }
  const RoundShape shape = RoundShape::Of(segment_sends, segment_recvs);
  // The rest of the calls alternate with the baselines', so that the machine's drift over the run
  // weighs on all three alike.
  for (int64_t i = 0; i < o.repeats; ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(double s, Timed(comm, o.call, [&] {
                                return internal::RawExchange(comm, raw.sends, raw.recvs, o.call);
                              }));
    raw_seconds.push_back(s);
    // Prepared (agreed) untimed, each repeat under a deadline of its own; the round is timed.
    SHARDKIT_ASSIGN_OR_RETURN(PreparedTransfer segments,
                              PreparedTransfer::Prepare(comm, {shape}, 0, o.call));
    SHARDKIT_ASSIGN_OR_RETURN(
        s, Timed(comm, o.call, [&] { return segments.Run(0, segment_sends, segment_recvs); }));
    segment_seconds.push_back(s);
    if (i + 1 < o.repeats) SHARDKIT_RETURN_IF_ERROR(timed_sync());
  }
  r.raw_segments_median_s = Median(segment_seconds);
  r.median_s = Median(seconds);
  r.min_s = *std::min_element(seconds.begin(), seconds.end());
  r.pack_median_s = Median(pack);
  r.unpack_median_s = Median(unpack);
  r.raw_median_s = Median(raw_seconds);
  r.recv_mib_per_s = r.median_s > 0 ? r.bytes_received / r.median_s / (1 << 20) : 0;
  return r;
}

}  // namespace shardkit::bench
