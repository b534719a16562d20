// A complete rank program that uses shardkit as a library: connect, build a module, shard it with
// a JSON plan, look at this rank's shards, gather a parameter back. Run it on two local ranks:
//
//   bazel build //integration/examples:shard_example
//   ./tools/shardkit launch --nproc 2 -- bazel-bin/integration/examples/shard_example
//
// Every rank runs the same code; the calls that talk to other ranks (ShardModule, Gather) are made
// in the same order everywhere. integration/examples/shard_example_test.sh runs it and checks
// its output.
#include <algorithm>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "core/engine/sharded_tensor.h"
#include "core/tensor/tensor.h"
#include "specs/plan.h"

namespace {

using shardkit::DType;
using shardkit::Shape;
using shardkit::Tensor;

// Rows of every layer's weight to all ranks in order, columns of the embedding; everything else
// (norm.weight) is replicated.
constexpr char kPlan[] = R"({
  "version": 1, "src_rank": 0, "strategy": "scatter",
  "rules": [
    {"match": "layers.*.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
    {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}}
  ]})";

// The first element of a float32 tensor, or "-" for an empty one.
std::string FirstValue(const Tensor& tensor) {
  absl::StatusOr<std::span<std::byte>> bytes = tensor.Bytes();
  if (!bytes.ok() || bytes->empty()) return "-";
  return std::to_string(static_cast<int>(*reinterpret_cast<const float*>(bytes->data())));
}

// Prints one line per parameter: its shards on this rank, or "replicated".
absl::Status PrintLocalShards(const shardkit::Module& module, int rank) {
  for (const std::string& name : module.names()) {
    SHARDKIT_ASSIGN_OR_RETURN(bool sharded, module.IsSharded(name));
    if (!sharded) {
      SHARDKIT_ASSIGN_OR_RETURN(const Tensor* tensor, module.GetTensor(name));
      std::cout << "rank " << rank << ": " << name << " replicated "
                << shardkit::ShapeToString(tensor->shape()) << "\n";
      continue;
    }
    SHARDKIT_ASSIGN_OR_RETURN(const shardkit::ShardedTensor* st, module.GetSharded(name));
    for (const shardkit::LocalShard& shard : st->local_shards()) {
      const shardkit::specs::ShardMetadata& meta = st->shards()[shard.index];
      std::cout << "rank " << rank << ": " << name << " shard " << shard.index << " offsets "
                << shardkit::ShapeToString(meta.offsets) << " sizes "
                << shardkit::ShapeToString(meta.sizes) << " first value "
                << FirstValue(shard.tensor) << "\n";
    }
  }
  return absl::OkStatus();
}

absl::Status Run() {
  // The rank, world size, backend and store come from the SHARDKIT_* environment that
  // `shardkit launch` sets.
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<shardkit::Communicator> comm,
                            shardkit::ConnectFromEnv());
  const int rank = comm->rank();

  // The source rank (0) holds the parameters' data; the others only their shapes (meta tensors).
  const std::vector<std::pair<std::string, Shape>> parameters = {{"embed.weight", {6, 4}},
                                                                 {"layers.0.weight", {5, 4}},
                                                                 {"layers.1.weight", {5, 4}},
                                                                 {"norm.weight", {4}}};
  shardkit::Module module;
  for (const auto& [name, shape] : parameters) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor, rank == 0 ? Tensor::Arange(shape, DType::kFloat32)
                                                       : Tensor::Meta(shape, DType::kFloat32));
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(name, std::move(tensor)));
  }

  // Every rank agrees on the plan, then each keeps exactly its shards.
  SHARDKIT_ASSIGN_OR_RETURN(shardkit::specs::Plan plan, shardkit::specs::ParsePlan(kPlan));
  SHARDKIT_RETURN_IF_ERROR(shardkit::ShardModule(module, plan, *comm));
  SHARDKIT_RETURN_IF_ERROR(PrintLocalShards(module, rank));

  // Reassemble one parameter on rank 0 (collective: every rank calls Gather).
  SHARDKIT_ASSIGN_OR_RETURN(const shardkit::ShardedTensor* embed,
                            module.GetSharded("embed.weight"));
  Tensor full;
  SHARDKIT_RETURN_IF_ERROR(embed->Gather(/*dst=*/0, rank == 0 ? &full : nullptr, *comm));
  if (rank == 0) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor expected, Tensor::Arange({6, 4}, DType::kFloat32));
    SHARDKIT_ASSIGN_OR_RETURN(std::span<std::byte> got, full.Bytes());
    SHARDKIT_ASSIGN_OR_RETURN(std::span<std::byte> want, expected.Bytes());
    const bool same = std::equal(got.begin(), got.end(), want.begin(), want.end());
    std::cout << "rank 0: gathered embed.weight " << shardkit::ShapeToString(full.shape())
              << (same ? " matches the original" : " DIFFERS from the original") << "\n";
    if (!same) return absl::InternalError("gathered embed.weight differs from the original");
  }
  return absl::OkStatus();
}

}  // namespace

int main() {
  if (absl::Status status = Run(); !status.ok()) {
    std::cerr << "shard_example: " << status << "\n";
    return 1;
  }
  return 0;
}
