#include "integration/bench/comm_bench.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace shardkit::bench {
namespace {

// One timed operation; buffers prepared by the caller.
absl::Status RunOnce(Communicator& comm, const CommBenchOptions& o, std::vector<uint8_t>& data,
                     std::vector<uint8_t>& recv, const std::vector<ConstBuffer>& sends) {
  if (o.pattern == CommPattern::kBroadcast) return comm.Broadcast(MutableBuffer(data), o.root);
  return comm.Scatter(comm.rank() == o.root ? sends : std::vector<ConstBuffer>{},
                      MutableBuffer(recv), o.root);
}

}  // namespace

std::string CommBenchResult::ToJson() const {
  return absl::StrCat("{\"rank\":", rank, ",\"world\":", world, ",\"mib\":", mib, ",\"pattern\":\"",
                      pattern, "\",\"median_s\":", median_s, ",\"min_s\":", min_s,
                      ",\"bytes_sent\":", bytes_sent, ",\"bytes_received\":", bytes_received, "}");
}

absl::StatusOr<CommBenchResult> RunCommBench(Communicator& comm, const CommBenchOptions& o) {
  const size_t total = static_cast<size_t>(o.mib) << 20;
  const int n = comm.world_size();
  // Scatter: rank r gets an uneven chunk (sizes differ by a few bytes; they sum to `total`).
  std::vector<size_t> chunk(n, total / n);
  chunk[n - 1] += total % n;
  const bool is_root = comm.rank() == o.root;
  std::vector<uint8_t> data(o.pattern == CommPattern::kBroadcast || is_root ? total : 0, 1);
  std::vector<uint8_t> recv(o.pattern == CommPattern::kScatter ? chunk[comm.rank()] : 0, 2);
  std::vector<ConstBuffer> sends;
  for (size_t r = 0, offset = 0; is_root && r < chunk.size(); offset += chunk[r++]) {
    sends.emplace_back(data.data() + offset, chunk[r]);
  }
  SHARDKIT_RETURN_IF_ERROR(RunOnce(comm, o, data, recv, sends));  // warm-up
  std::vector<double> seconds;
  comm.ResetCounters();
  for (int i = 0; i < o.repeats; ++i) {
    SHARDKIT_RETURN_IF_ERROR(comm.Barrier());
    const absl::Time start = absl::Now();
    SHARDKIT_RETURN_IF_ERROR(RunOnce(comm, o, data, recv, sends));
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  std::sort(seconds.begin(), seconds.end());
  const CollectiveOp op =
      o.pattern == CommPattern::kBroadcast ? CollectiveOp::kBroadcast : CollectiveOp::kScatter;
  const OpCounters c = comm.counters(op);
  CommBenchResult r;
  r.rank = comm.rank();
  r.world = n;
  r.pattern = o.pattern == CommPattern::kBroadcast ? "broadcast" : "scatter";
  r.mib = o.mib;
  r.median_s = seconds[seconds.size() / 2];
  r.min_s = seconds.front();
  r.bytes_sent = c.bytes_sent / std::max(1, o.repeats);
  r.bytes_received = c.bytes_received / std::max(1, o.repeats);
  return r;
}

}  // namespace shardkit::bench
