#include "integration/bench/shard_bench.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/engine/module.h"
#include "core/engine/reshard.h"
#include "core/engine/shard_parameter.h"
#include "core/os/proc_status.h"
#include "core/tensor/allocator.h"
#include "integration/bench/bench_util.h"
#include "specs/parameter_layout.h"
#include "specs/plan.h"
#include "specs/spec_json.h"

namespace shardkit::bench {
namespace {

constexpr int64_t kRowBytes = 4096;

// Every rank's chunk of `dim`, on `device` ("cpu", or "cuda": each rank's own).
std::string SpecJson(const Device& device, int dim = 0) {
  return absl::StrCat(R"({"type": "chunk", "dim": )", dim,
                      R"(, "placements": {"ranks": "all", "device": ")", device.ToString(),
                      R"("}})");
}

// Waits until the device has finished what this process queued on it. CUDA's device-to-device
// copies (the engine's local shards, CopyMover) return before they are done; a one-byte copy to
// the host through the same allocator (cudaMemcpy on the legacy default stream, which also waits
// for the communicator's blocking stream) returns only after all of it. No-op on the CPU.
class DeviceFence {
 public:
  absl::Status Prepare(const Device& device) {
    device_ = device;
    if (device == Device::Cpu()) return absl::OkStatus();
    SHARDKIT_ASSIGN_OR_RETURN(allocator_, GetAllocator(device));
    SHARDKIT_ASSIGN_OR_RETURN(probe_, TouchedStorage(device, 1));
    return absl::OkStatus();
  }

  absl::Status Wait() {
    if (probe_ == nullptr) return absl::OkStatus();
    std::byte host{};
    return allocator_->Copy(&host, Device::Cpu(), probe_->data(), device_, 1);
  }

 private:
  Device device_ = Device::Cpu();
  Allocator* allocator_ = nullptr;
  std::shared_ptr<Storage> probe_;
};

// The parameters this rank starts from: real data on the source, meta tensors elsewhere.
struct Setup {
  Module module;
  std::vector<std::string> names;
  std::vector<Tensor> initial;               // what each slot is reset to before a round
  std::vector<specs::ShardMetadata> shards;  // the (common) layout of every parameter
};

absl::StatusOr<Setup> MakeParameters(const Communicator& comm, const ShardBenchOptions& o,
                                     const specs::ShardingSpec& spec, const Device& device) {
  const int64_t rows = (o.mib << 20) / o.params / kRowBytes;
  const Shape shape = {rows, kRowBytes / static_cast<int64_t>(ElementSize(o.dtype))};
  Setup setup;
  SHARDKIT_ASSIGN_OR_RETURN(specs::ParameterLayout layout,
                            specs::LayOutParameter(spec, shape, comm.world_size()));
  setup.shards = std::move(layout.shards);
  for (int64_t i = 0; i < o.params; ++i) {
    std::string name = o.params == 1 ? "weight" : absl::StrCat("layers.", i, ".weight");
    absl::StatusOr<Tensor> tensor = Tensor::Meta(shape, o.dtype);
    if (comm.rank() == 0) tensor = Tensor::Empty(shape, o.dtype, device);
    if (!tensor.ok()) return tensor.status();
    if (comm.rank() == 0) {
      SHARDKIT_RETURN_IF_ERROR(
          Touch(device, tensor->data(), static_cast<size_t>(tensor->nbytes())));
    }
    SHARDKIT_RETURN_IF_ERROR(setup.module.AddParameter(name, *tensor));
    setup.names.push_back(std::move(name));
    setup.initial.push_back(*std::move(tensor));
  }
  return setup;
}

absl::Status ResetSlots(Setup& setup) {
  for (size_t i = 0; i < setup.names.size(); ++i) {
    SHARDKIT_RETURN_IF_ERROR(setup.module.SetTensor(setup.names[i], setup.initial[i]));
  }
  return absl::OkStatus();
}

// Raw: per parameter, the source sends each rank the bytes of its dim-0 chunk (contiguous) straight
// from the tensor; the others receive into a buffer allocated and touched once, up front.
class RawMover {
 public:
  absl::Status Prepare(const Communicator& comm, const Setup& setup, const Device& device) {
    const int64_t row_bytes = kRowBytes;
    const int n = comm.world_size();
    for (size_t p = 0; p < setup.names.size(); ++p) {
      std::vector<ConstBuffer> sends(n);
      std::vector<MutableBuffer> recvs(n);
      for (const specs::ShardMetadata& shard : setup.shards) {
        const int r = static_cast<int>(shard.placement.rank());
        const size_t bytes = static_cast<size_t>(shard.sizes[0] * row_bytes);
        if (comm.rank() == 0) {
          sends[r] =
              ConstBuffer(setup.initial[p].data() + shard.offsets[0] * row_bytes, bytes, device);
        } else if (r == comm.rank() && bytes > 0) {
          SHARDKIT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage,
                                    TouchedStorage(device, bytes));
          recvs[0] = MutableBuffer(storage->data(), bytes, device);
          storage_.push_back(std::move(storage));
        }
      }
      for (int r = 0; r < n; ++r) {
        if (r == comm.rank()) continue;
        bytes_sent_ += static_cast<int64_t>(sends[r].size);
        bytes_received_ += static_cast<int64_t>(recvs[r].size);
      }
      sends_.push_back(std::move(sends));
      recvs_.push_back(std::move(recvs));
    }
    return absl::OkStatus();
  }

  absl::Status Move(Communicator& comm, const CallOptions& call) {
    for (size_t p = 0; p < sends_.size(); ++p) {
      SHARDKIT_RETURN_IF_ERROR(internal::RawExchange(comm, sends_[p], recvs_[p], call));
    }
    return absl::OkStatus();
  }

  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  std::vector<std::vector<ConstBuffer>> sends_;
  std::vector<std::vector<MutableBuffer>> recvs_;
  std::vector<std::shared_ptr<Storage>> storage_;
  int64_t bytes_sent_ = 0, bytes_received_ = 0;
};

// Copy: per parameter, this rank's chunk copied from one touched buffer to another on its device
// (on the source, from the parameter itself): the floor without any transport.
class CopyMover {
 public:
  absl::Status Prepare(const Communicator& comm, const Setup& setup, const Device& device) {
    device_ = device;
    SHARDKIT_ASSIGN_OR_RETURN(allocator_, GetAllocator(device));
    for (size_t p = 0; p < setup.names.size(); ++p) {
      for (const specs::ShardMetadata& shard : setup.shards) {
        const size_t bytes = static_cast<size_t>(shard.sizes[0] * kRowBytes);
        if (shard.placement.rank() != comm.rank() || bytes == 0) continue;
        const std::byte* from =
            comm.rank() == 0 ? setup.initial[p].data() + shard.offsets[0] * kRowBytes : nullptr;
        if (from == nullptr) {
          SHARDKIT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> src, TouchedStorage(device, bytes));
          from = src->data();
          storage_.push_back(std::move(src));
        }
        SHARDKIT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> dst, TouchedStorage(device, bytes));
        copies_.push_back({dst->data(), from, bytes});
        storage_.push_back(std::move(dst));
        bytes_ += static_cast<int64_t>(bytes);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Move() {
    for (const Copy& c : copies_) {
      SHARDKIT_RETURN_IF_ERROR(allocator_->Copy(c.to, device_, c.from, device_, c.bytes));
    }
    return absl::OkStatus();
  }

  int64_t bytes() const { return bytes_; }

 private:
  struct Copy {
    std::byte* to;
    const std::byte* from;
    size_t bytes;
  };
  Device device_ = Device::Cpu();
  Allocator* allocator_ = nullptr;
  std::vector<Copy> copies_;
  std::vector<std::shared_ptr<Storage>> storage_;
  int64_t bytes_ = 0;
};

// One timed ShardParameter / ShardModule; `stats` gets its steps' times.
absl::Status ShardOnce(Communicator& comm, Setup& setup, const ShardBenchOptions& o,
                       const specs::ShardingSpec& spec, ShardStats* stats) {
  ShardOptions options;
  options.src_rank = 0;
  options.strategy =
      o.strategy == BenchStrategy::kBroadcast ? Strategy::kBroadcast : Strategy::kScatter;
  options.call = o.call;
  options.stats = stats;
  if (o.params == 1) {
    SHARDKIT_RETURN_IF_ERROR(ShardParameter(setup.module, setup.names[0], spec, comm, options));
  } else {
    specs::Plan plan;
    plan.strategy = options.strategy;
    plan.rules.push_back({"**", spec});
    SHARDKIT_RETURN_IF_ERROR(ShardModule(setup.module, plan, comm, {}, options));
  }
  return absl::OkStatus();
}

// One timed Reshard of every (scattered) parameter from rows to columns; the results dropped.
absl::Status ReshardOnce(Communicator& comm, const Setup& setup, const specs::ShardingSpec& to,
                         const ShardBenchOptions& o) {
  const ReshardOptions options{.memory_bytes = o.budget_mib << 20, .call = o.call};
  for (const std::string& name : setup.names) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShardedTensor* st, setup.module.GetSharded(name));
    SHARDKIT_RETURN_IF_ERROR(Reshard(*st, to, comm, options).status());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchStrategy> ParseBenchStrategy(std::string_view name) {
  if (name == "scatter") return BenchStrategy::kScatter;
  if (name == "broadcast") return BenchStrategy::kBroadcast;
  if (name == "raw") return BenchStrategy::kRaw;
  if (name == "copy") return BenchStrategy::kCopy;
  if (name == "reshard") return BenchStrategy::kReshard;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown strategy \"", std::string(name),
                   "\" (expected scatter, broadcast, raw, copy or reshard)"));
}

std::string_view BenchStrategyName(BenchStrategy strategy) {
  switch (strategy) {
    case BenchStrategy::kScatter:
      return "scatter";
    case BenchStrategy::kBroadcast:
      return "broadcast";
    case BenchStrategy::kRaw:
      return "raw";
    case BenchStrategy::kCopy:
      return "copy";
    case BenchStrategy::kReshard:
      return "reshard";
  }
  return "unknown";
}

absl::Status ValidateShardBenchOptions(const ShardBenchOptions& o) {
  if (o.mib < 1) return absl::InvalidArgumentError(absl::StrCat("--mib must be >= 1, got ", o.mib));
  if (o.params < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--params must be >= 1, got ", o.params));
  }
  if (o.repeats < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--repeats must be >= 1, got ", o.repeats));
  }
  if (o.budget_mib < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--budget-mib must be >= 1, got ", o.budget_mib));
  }
  if ((o.mib << 20) / o.params < kRowBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--mib ", o.mib, " over --params ", o.params,
                                                   " leaves parameters under one 4 KiB row"));
  }
  return absl::OkStatus();
}

std::string ShardBenchResult::ToJson() const {
  return absl::StrCat(
      "{\"rank\":", rank, ",\"world\":", world, ",\"mib\":", mib, ",\"strategy\":\"", strategy,
      "\",\"median_s\":", median_s, ",\"min_s\":", min_s,
      ",\"baseline_rss_mib\":", baseline_rss_mib, ",\"peak_rss_mib\":", peak_rss_mib,
      ",\"bytes_sent\":", bytes_sent, ",\"bytes_received\":", bytes_received,
      ",\"agree_median_s\":", agree_median_s, ",\"agree_max_s\":", agree_max_s,
      ",\"check_median_s\":", check_median_s, ",\"agree_begin_us\":", agree_begin_us,
      ",\"agree_end_us\":", agree_end_us, ",\"connections\":", connections,
      ",\"startup_s\":", startup_s, ",\"device\":\"", device, "\"}");
}

absl::StatusOr<ShardBenchResult> RunShardBench(Communicator& comm, const ShardBenchOptions& o) {
  SHARDKIT_RETURN_IF_ERROR(ValidateShardBenchOptions(o));
  ShardBenchResult result;
  result.rank = comm.rank();
  result.world = comm.world_size();
  result.mib = o.mib;
  result.strategy = std::string(BenchStrategyName(o.strategy));
  // Where the peak cannot be reset, peak_rss_mib is the whole process's peak.
  os::ResetPeakRss().IgnoreError();
  result.baseline_rss_mib = StatusFieldMiB("VmRSS");
  const Device device = comm.DefaultDevice();
  result.device = device.ToString();
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec spec, specs::ParseSpec(SpecJson(device)));
  SHARDKIT_ASSIGN_OR_RETURN(Setup setup, MakeParameters(comm, o, spec, device));
  RawMover raw;
  CopyMover copy;
  DeviceFence fence;
  SHARDKIT_RETURN_IF_ERROR(fence.Prepare(device));
  if (o.strategy == BenchStrategy::kRaw) SHARDKIT_RETURN_IF_ERROR(raw.Prepare(comm, setup, device));
  if (o.strategy == BenchStrategy::kCopy) {
    SHARDKIT_RETURN_IF_ERROR(copy.Prepare(comm, setup, device));
  }
  const bool reshard = o.strategy == BenchStrategy::kReshard;
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec to, specs::ParseSpec(SpecJson(device, 1)));
  if (reshard) SHARDKIT_RETURN_IF_ERROR(ShardOnce(comm, setup, o, spec, nullptr));
  comm.ResetCounters();
  std::vector<double> seconds, agree, check;
  for (int64_t i = 0; i < o.repeats; ++i) {
    ShardStats stats;
    SHARDKIT_RETURN_IF_ERROR(comm.Barrier(o.call));
    const absl::Time start = absl::Now();
    if (o.strategy == BenchStrategy::kRaw) {
      SHARDKIT_RETURN_IF_ERROR(raw.Move(comm, o.call));
    } else if (o.strategy == BenchStrategy::kCopy) {
      SHARDKIT_RETURN_IF_ERROR(copy.Move());
    } else if (reshard) {
      SHARDKIT_RETURN_IF_ERROR(ReshardOnce(comm, setup, to, o));
    } else {
      SHARDKIT_RETURN_IF_ERROR(ShardOnce(comm, setup, o, spec, &stats));
    }
    SHARDKIT_RETURN_IF_ERROR(fence.Wait());
    SHARDKIT_RETURN_IF_ERROR(comm.Barrier(o.call));
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    agree.push_back(stats.agree_seconds);
    check.push_back(stats.check_seconds);
    if (stats.agree_begin != absl::InfinitePast()) {
      result.agree_begin_us = absl::ToUnixMicros(stats.agree_begin);
      result.agree_end_us = absl::ToUnixMicros(stats.agree_end);
    }
    if (!reshard) SHARDKIT_RETURN_IF_ERROR(ResetSlots(setup));  // frees this round's shards
  }
  result.median_s = Median(seconds);
  result.min_s = *std::min_element(seconds.begin(), seconds.end());
  result.agree_median_s = Median(agree);
  result.agree_max_s = *std::max_element(agree.begin(), agree.end());
  result.check_median_s = Median(check);
  // Counted before anyone leaves: a peer's exit would disconnect its sockets here.
  result.connections = os::CountTcpConnections().value_or(-1);
  SHARDKIT_RETURN_IF_ERROR(comm.Barrier(o.call));
  result.peak_rss_mib = StatusFieldMiB("VmHWM");
  if (o.strategy == BenchStrategy::kRaw) {
    result.bytes_sent = raw.bytes_sent();
    result.bytes_received = raw.bytes_received();
  } else if (o.strategy == BenchStrategy::kCopy) {
    result.bytes_received = copy.bytes();
  } else if (reshard) {
    const OpCounters moved = comm.counters(CollectiveOp::kAllToAllSegments);
    const OpCounters all_to_all = comm.counters(CollectiveOp::kAllToAll);
    result.bytes_sent = (moved.bytes_sent + all_to_all.bytes_sent) / o.repeats;
    result.bytes_received = (moved.bytes_received + all_to_all.bytes_received) / o.repeats;
  } else {
    const OpCounters scatter = comm.counters(CollectiveOp::kScatter);
    const OpCounters broadcast = comm.counters(CollectiveOp::kBroadcast);
    result.bytes_sent = (scatter.bytes_sent + broadcast.bytes_sent) / o.repeats;
    result.bytes_received = (scatter.bytes_received + broadcast.bytes_received) / o.repeats;
  }
  return result;
}

}  // namespace shardkit::bench
