// One rank of `shardkit demo`: shard the synthetic model with the built-in plan, gather every
// parameter back to rank 0, verify it bit for bit and collect what each rank did.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, ConnectFromEnv());
//   SHARDKIT_ASSIGN_OR_RETURN(DemoReport report, RunDemoRank(*comm, {.progress = &std::cerr}));
//   if (comm->rank() == 0) std::cout << cli::FormatDemoSummary(report);  // cli/demo_summary.h
//   return report.verified() ? 0 : 1;
//
// The steps, in the same order on every rank (docs/architecture.md, "ShardParameter and
// ShardModule: the data flow"):
//  1. Rank 0 (the source) materialises the model (synthetic_model.h); the others build meta
//     tensors of the same shapes and never hold a whole sharded parameter.
//  2. ShardModule with DemoPlanJson: one agreement for the whole plan, the transfers, one commit.
//  3. For every parameter in module order: a sharded one is gathered to rank 0
//     (ShardedTensor::Gather) and compared there with ExpectedParameter; a replicated one is
//     compared on every rank with its own copy. Mismatches are counted, never returned early, so
//     that no rank leaves a collective its peers are in.
//  4. One AllGather of every rank's RankReport (bytes moved, peak RSS, mismatches).
#ifndef SHARDKIT_INTEGRATION_DEMO_DEMO_RANK_H_
#define SHARDKIT_INTEGRATION_DEMO_DEMO_RANK_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/shard_parameter.h"
#include "core/tensor/device.h"
#include "integration/demo/synthetic_model.h"
#include "specs/plan.h"

namespace shardkit::demo {

struct DemoOptions {
  SyntheticModelConfig model;
  // Where this rank's tensors live: the source's model, every shard and the gathered copies. The
  // CPU for backends that move host memory (Gloo, MPI); cuda:LOCAL_RANK for NCCL (the CLI picks it
  // with DemoDevice). Verification copies device tensors to the host to compare them.
  Device device = Device::Cpu();
  // Rank 0 writes one line per step here (e.g. &std::cerr); nullptr: silent.
  std::ostream* progress = nullptr;
};

// What one rank did. Plain data of fixed size: exchanged byte for byte between ranks running the
// same binary.
struct RankReport {
  int64_t shards = 0;                // shards held, a replicated parameter counting as one
  int64_t local_bytes = 0;           // bytes of those shards
  int64_t shard_bytes_sent = 0;      // payload moved by ShardModule (agreement included)
  int64_t shard_bytes_received = 0;  //
  int64_t gather_bytes_sent = 0;     // payload moved by the gathers
  int64_t gather_bytes_received = 0;
  int64_t peak_rss_bytes = 0;  // VmHWM at the end
  int64_t mismatches = 0;      // parameters this rank found different from ExpectedParameter
};

struct DemoReport {
  int world_size = 1;
  std::string backend;
  Device device = Device::Cpu();  // DemoOptions::device of this rank
  SyntheticModelConfig model;
  specs::Plan plan;
  // Every parameter with its layout (spec, shards and their ranks), in module order.
  std::vector<specs::ResolvedParameter> parameters;
  std::vector<RankReport> ranks;        // one per rank, by rank
  std::vector<std::string> mismatched;  // names of the parameters this rank found different
  double build_seconds = 0;             // materialising the model (rank 0) or its meta tensors
  double shard_seconds = 0;             // ShardModule
  ShardStats shard_stats;               // ShardModule's steps
  double gather_seconds = 0;            // gathering and verifying

  // True if no rank found a mismatch.
  bool verified() const;
};

// The device the demo uses on this rank: the CPU when `comm` moves host memory, else
// cuda:`local_rank` (the device a CUDA backend binds a rank to).
Device DemoDevice(const Communicator& comm, int local_rank);

// Collective: runs the demo on this rank (see the file comment). A verification failure is not an
// error: it is reported in DemoReport (mismatches, mismatched). Requires rank 0 to be the source.
// Errors: those of ShardModule / Gather / AllGather (kInvalidArgument, kDeadlineExceeded,
// kUnavailable, ...); kInternal if the ranks' reports do not have the same size.
[[nodiscard]] absl::StatusOr<DemoReport> RunDemoRank(Communicator& comm,
                                                     const DemoOptions& options = {});

}  // namespace shardkit::demo

#endif  // SHARDKIT_INTEGRATION_DEMO_DEMO_RANK_H_
