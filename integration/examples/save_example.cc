// A rank program that saves its sharded module to a shard directory and loads one back, with
// checkpoint::SaveShards and LoadShards. Run under `shardkit launch`:
//
//   shardkit launch --nproc 4 -- save_example save DIR REF.safetensors
//   shardkit gather --in DIR --out full.safetensors     # the same bytes as REF.safetensors
//   shardkit launch --nproc 3 -- save_example load DIR  # another world size and plan
//
// `save`: rank 0 holds the full parameters (deterministic values), ShardModule spreads them
// (rows, columns; norm.weight replicated), every rank saves its shards into DIR; rank 0 also writes
// the full parameters to REF (the checkpoint `gather` must give back). `load`: every rank starts
// from meta tensors, loads DIR laid out the other way (columns, rows; norm.weight by ranges) and
// checks each of its shards against the values. Exit 0, 2 for bad input (kInvalidArgument,
// kNotFound: the CLI's convention), 1 otherwise; the error on stderr. integration/examples/
// save_example_test.sh runs it with the shardkit binary.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "core/engine/module.h"
#include "core/engine/shard_parameter.h"
#include "core/engine/sharded_tensor.h"
#include "core/os/files.h"
#include "core/tensor/tensor.h"
#include "integration/checkpoint/save_shards.h"
#include "integration/formats/safetensors/safetensors.h"
#include "specs/plan.h"

namespace {

using shardkit::DType;
using shardkit::Module;
using shardkit::Shape;
using shardkit::Tensor;

struct Parameter {
  const char* name;
  Shape shape;
  DType dtype;
};
const Parameter kParameters[] = {{"embed.weight", {9, 4}, DType::kFloat32},
                                 {"layers.0.weight", {5, 7}, DType::kInt32},
                                 {"norm.weight", {6}, DType::kBFloat16}};

constexpr char kSavePlan[] = R"({"rules": [
    {"match": "embed.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
    {"match": "layers.*.weight", "spec": {"type": "chunk", "dim": 1,
                                          "placements": {"ranks": "all"}}}]})";
constexpr char kLoadPlan[] = R"({"rules": [
    {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
    {"match": "layers.*.weight", "spec": {"type": "chunk", "dim": 0,
                                          "placements": {"ranks": "all"}}},
    {"match": "norm.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]})";

absl::StatusOr<Tensor> Full(size_t i) {
  return Tensor::Arange(kParameters[i].shape, kParameters[i].dtype, 100 * static_cast<int64_t>(i));
}

// REF: the full parameters as one safetensors file, with the metadata the save records.
absl::Status WriteReference(const std::string& path) {
  std::vector<shardkit::safetensors::TensorInfo> infos;
  for (const Parameter& p : kParameters) infos.push_back({p.name, p.dtype, p.shape, 0, 0});
  SHARDKIT_ASSIGN_OR_RETURN(
      shardkit::safetensors::FileLayout layout,
      shardkit::safetensors::PlanFile(path, infos, {{"saved_by", "example"}}));
  SHARDKIT_ASSIGN_OR_RETURN(shardkit::os::AtomicFile file, shardkit::os::AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file.Write(layout.prefix.data(), layout.prefix.size()));
  for (const shardkit::safetensors::TensorInfo& info : layout.tensors) {
    const size_t i =
        static_cast<size_t>(std::find_if(std::begin(kParameters), std::end(kParameters),
                                         [&](const Parameter& p) { return info.name == p.name; }) -
                            std::begin(kParameters));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor full, Full(i));
    SHARDKIT_RETURN_IF_ERROR(file.WriteAt(layout.prefix.size() + info.begin, full.data(),
                                          static_cast<size_t>(full.nbytes())));
  }
  return file.Commit();
}

absl::Status Save(const std::string& dir, const std::string& reference,
                  shardkit::Communicator& comm) {
  Module module;
  for (size_t i = 0; i < std::size(kParameters); ++i) {
    const Parameter& p = kParameters[i];
    SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor,
                              comm.rank() == 0 ? Full(i) : Tensor::Meta(p.shape, p.dtype));
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(p.name, std::move(tensor)));
  }
  SHARDKIT_ASSIGN_OR_RETURN(shardkit::specs::Plan plan, shardkit::specs::ParsePlan(kSavePlan));
  SHARDKIT_RETURN_IF_ERROR(shardkit::ShardModule(module, plan, comm));
  // norm.weight (no rule) is now whole on every rank, each rank's file holds it.
  SHARDKIT_RETURN_IF_ERROR(
      shardkit::checkpoint::SaveShards(dir, module, comm, {.metadata = {{"saved_by", "example"}}}));
  if (comm.rank() == 0) SHARDKIT_RETURN_IF_ERROR(WriteReference(reference));
  std::cout << "rank " << comm.rank() << ": saved " << module.size() << " parameters\n";
  return absl::OkStatus();
}

// Every shard this rank holds (or a replicated tensor) equals that part of the full value.
absl::Status Verify(const Module& module) {
  for (size_t i = 0; i < std::size(kParameters); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor full, Full(i));
    SHARDKIT_ASSIGN_OR_RETURN(const shardkit::ShardedTensor* st,
                              module.GetSharded(kParameters[i].name));
    for (const shardkit::LocalShard& shard : st->local_shards()) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor want,
                                shardkit::NarrowToShard(full, st->shards()[shard.index]));
      SHARDKIT_ASSIGN_OR_RETURN(Tensor want_bytes, want.Contiguous());
      if (!std::equal(shard.tensor.data(), shard.tensor.data() + shard.tensor.nbytes(),
                      want_bytes.data(), want_bytes.data() + want_bytes.nbytes())) {
        return absl::InternalError(
            absl::StrCat(kParameters[i].name, " shard ", shard.index, " differs"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Load(const std::string& dir, shardkit::Communicator& comm) {
  Module module;
  for (const Parameter& p : kParameters) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor meta, Tensor::Meta(p.shape, p.dtype));
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(p.name, std::move(meta)));
  }
  SHARDKIT_ASSIGN_OR_RETURN(shardkit::specs::Plan plan, shardkit::specs::ParsePlan(kLoadPlan));
  SHARDKIT_RETURN_IF_ERROR(shardkit::checkpoint::LoadShards(dir, module, plan, comm));
  SHARDKIT_RETURN_IF_ERROR(Verify(module));
  std::cout << "rank " << comm.rank() << ": loaded and verified " << module.size()
            << " parameters\n";
  return absl::OkStatus();
}

absl::Status Run(const std::vector<std::string>& args) {
  const bool save = args.size() == 3 && args[0] == "save";
  if (!save && !(args.size() == 2 && args[0] == "load")) {
    return absl::InvalidArgumentError("usage: save_example save DIR REF | load DIR");
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<shardkit::Communicator> comm,
                            shardkit::ConnectFromEnv());
  return save ? Save(args[1], args[2], *comm) : Load(args[1], *comm);
}

}  // namespace

int main(int argc, char** argv) {
  if (absl::Status status = Run(std::vector<std::string>(argv + 1, argv + argc)); !status.ok()) {
    std::cerr << "save_example: " << status << "\n";
    return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ? 2 : 1;
  }
  return 0;
}
