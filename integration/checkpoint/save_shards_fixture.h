// The module every SaveShards/LoadShards test saves and loads (save_shards_test.cc,
// save_shards_errors_test.cc): five parameters of four dtypes, the plan they are saved with and
// another to load them by, and the checks of what a rank holds.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SAVE_SHARDS_FIXTURE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SAVE_SHARDS_FIXTURE_H_

#include <cstddef>

#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "core/tensor/tensor.h"
#include "specs/plan.h"

namespace shardkit::checkpoint::save_fixture {

struct Param {
  const char* name;
  Shape shape;
  DType dtype;
};
inline const Param kParams[] = {{"embed.weight", {10, 6}, DType::kFloat32},
                                {"layers.0.proj.weight", {7, 5}, DType::kInt32},
                                {"head.weight", {6, 4}, DType::kBFloat16},
                                {"norm.weight", {4}, DType::kFloat32},
                                {"cols.view", {5, 3}, DType::kInt16}};

// The full value of parameter i, the same on every rank.
Tensor Full(size_t i);

// The layout the module is saved with: rows, columns (7 over 4: uneven), an enumerable spec
// holding two shards on rank 0 (NAME#K in its file); norm.weight and cols.view replicated.
specs::Plan SavePlan();

// Another layout, for any world: rows <-> columns, the enumerable one replicated, norm.weight
// enumerable over the first and last rank.
specs::Plan LoadPlan(int world);

bool SameBytes(const Tensor& a, const Tensor& b);

// Every slot holds exactly this rank's part of the full tensors under `plan` (replicated: whole).
void ExpectLoaded(const Module& module, int rank);

// A module of meta tensors of the global shapes and dtypes (what a loading program starts from).
Module MetaModule();

// The module sharded by SavePlan from full tensors; cols.view a non-contiguous view.
Module ShardedModule(Communicator& comm);

}  // namespace shardkit::checkpoint::save_fixture

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SAVE_SHARDS_FIXTURE_H_
