#include "integration/demo/demo_rank.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "core/engine/module.h"
#include "core/engine/sharded_tensor.h"
#include "core/os/proc_status.h"
#include "core/tensor/tensor.h"

namespace shardkit::demo {
namespace {

constexpr int kSource = 0;

double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

void Progress(const DemoOptions& options, int rank, const std::string& line) {
  if (options.progress != nullptr && rank == kSource) *options.progress << "demo: " << line << "\n";
}

// Bit-exact equality of two materialised host tensors (dtype, shape and every byte).
bool SameContents(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  absl::StatusOr<std::span<std::byte>> x = a.Bytes(), y = b.Bytes();
  return x.ok() && y.ok() && std::equal(x->begin(), x->end(), y->begin(), y->end());
}

// Whether `actual` (on any device) holds parameter `index`'s expected contents.
absl::StatusOr<bool> Matches(const std::vector<specs::ParameterInfo>& params, size_t index,
                             const Tensor& actual) {
  SHARDKIT_ASSIGN_OR_RETURN(Tensor expected, ExpectedParameter(params[index], index));
  if (actual.device() == Device::Cpu()) return SameContents(actual, expected);
  SHARDKIT_ASSIGN_OR_RETURN(Tensor host, actual.Clone(Device::Cpu()));
  return SameContents(host, expected);
}

// This rank's shards and their bytes, after ShardModule.
absl::Status CountLocalShards(const Module& module, RankReport& mine) {
  for (const std::string& name : module.names()) {
    SHARDKIT_ASSIGN_OR_RETURN(bool sharded, module.IsSharded(name));
    if (sharded) {
      SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, module.GetSharded(name));
      mine.shards += static_cast<int64_t>(st->local_shards().size());
      mine.local_bytes += st->local_nbytes();
    } else {
      SHARDKIT_ASSIGN_OR_RETURN(const Tensor* t, module.GetTensor(name));
      mine.shards += 1;
      mine.local_bytes += t->nbytes();
    }
  }
  return absl::OkStatus();
}

// Step 3: gathers every sharded parameter to the source and compares it there; compares every
// replicated parameter on every rank. Records mismatches in `report`.
absl::Status GatherAndVerify(const Module& module, Communicator& comm, DemoReport& report,
                             RankReport& mine) {
  const std::vector<specs::ParameterInfo> params = SyntheticParameters(report.model);
  const bool source = comm.rank() == kSource;
  for (size_t i = 0; i < params.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(bool sharded, module.IsSharded(params[i].name));
    bool same = true;
    if (sharded) {
      SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, module.GetSharded(params[i].name));
      Tensor full;
      SHARDKIT_RETURN_IF_ERROR(st->Gather(kSource, source ? &full : nullptr, comm));
      if (source) {
        SHARDKIT_ASSIGN_OR_RETURN(same, Matches(params, i, full));
      }
    } else {
      SHARDKIT_ASSIGN_OR_RETURN(const Tensor* t, module.GetTensor(params[i].name));
      SHARDKIT_ASSIGN_OR_RETURN(same, Matches(params, i, *t));
    }
    if (!same) report.mismatched.push_back(params[i].name);
  }
  mine.mismatches = static_cast<int64_t>(report.mismatched.size());
  return absl::OkStatus();
}

// Step 4: every rank's report, by rank.
absl::StatusOr<std::vector<RankReport>> ExchangeReports(const RankReport& mine,
                                                        Communicator& comm) {
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            comm.AllGather(ConstBuffer(&mine, sizeof(mine))));
  std::vector<RankReport> reports(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(RankReport)) {
      return absl::InternalError(
          absl::StrFormat("rank %d sent a %d-byte demo report, expected %d (different binaries?)",
                          r, all[r].size(), sizeof(RankReport)));
    }
    std::memcpy(&reports[r], all[r].data(), sizeof(RankReport));
  }
  return reports;
}

}  // namespace

Device DemoDevice(const Communicator& comm, int local_rank) {
  const Device device = comm.DefaultDevice();
  return device.is_cuda() ? Device::Cuda(local_rank) : device;
}

bool DemoReport::verified() const {
  return std::all_of(ranks.begin(), ranks.end(),
                     [](const RankReport& r) { return r.mismatches == 0; }) &&
         mismatched.empty();
}

absl::StatusOr<DemoReport> RunDemoRank(Communicator& comm, const DemoOptions& options) {
  const int rank = comm.rank();
  DemoReport report;
  report.world_size = comm.world_size();
  report.backend = comm.backend();
  report.device = options.device;
  report.model = options.model;
  SHARDKIT_ASSIGN_OR_RETURN(report.plan,
                            specs::ParsePlan(DemoPlanJson(options.model, report.world_size)));
  SHARDKIT_ASSIGN_OR_RETURN(
      report.parameters,
      specs::Resolve(report.plan, SyntheticParameters(options.model), report.world_size));

  Progress(
      options, rank,
      absl::StrFormat("building the model on rank %d: %d parameters, %.1f MiB", kSource,
                      report.parameters.size(), SyntheticModelBytes(options.model) / 1048576.0));
  absl::Time start = absl::Now();
  SHARDKIT_ASSIGN_OR_RETURN(Module module,
                            BuildSyntheticModel(options.model, rank == kSource, options.device));
  report.build_seconds = SecondsSince(start);

  Progress(options, rank, absl::StrFormat("sharding across %d ranks", report.world_size));
  comm.ResetCounters();
  start = absl::Now();
  SHARDKIT_RETURN_IF_ERROR(
      ShardModule(module, report.plan, comm, {}, {.stats = &report.shard_stats}));
  report.shard_seconds = SecondsSince(start);
  RankReport mine;
  const OpCounters shard_counters = comm.total_counters();
  mine.shard_bytes_sent = shard_counters.bytes_sent;
  mine.shard_bytes_received = shard_counters.bytes_received;
  SHARDKIT_RETURN_IF_ERROR(CountLocalShards(module, mine));

  Progress(options, rank, absl::StrFormat("gathering to rank %d and verifying", kSource));
  comm.ResetCounters();
  start = absl::Now();
  SHARDKIT_RETURN_IF_ERROR(GatherAndVerify(module, comm, report, mine));
  report.gather_seconds = SecondsSince(start);
  const OpCounters gather_counters = comm.total_counters();
  mine.gather_bytes_sent = gather_counters.bytes_sent;
  mine.gather_bytes_received = gather_counters.bytes_received;
  SHARDKIT_ASSIGN_OR_RETURN(mine.peak_rss_bytes, os::ProcStatusBytes("VmHWM"));
  SHARDKIT_ASSIGN_OR_RETURN(report.ranks, ExchangeReports(mine, comm));
  return report;
}

}  // namespace shardkit::demo
