// SaveShards and LoadShards: a running program's sharded Module to and from a shard directory
// (shard_dir.h, the format `shardkit shard` writes) or a PyTorch DCP checkpoint (SaveShardsOptions
// ::format; LoadShards reads either), without gathering any tensor: a C++ training job saves what
// its Python tools `dcp.load`, and loads what they `dcp.save`d.
//
//   // Every rank, collectively: each writes the shards it holds.
//   SHARDKIT_RETURN_IF_ERROR(SaveShards("ckpt", module, *comm));
//   // Later, perhaps with another world size and plan: each rank reads its new shards.
//   Module fresh;  // meta tensors of the global shapes and dtypes are enough
//   SHARDKIT_RETURN_IF_ERROR(fresh.AddParameter("w", *Tensor::Meta({1024, 512}, DType::kFloat32)));
//   SHARDKIT_RETURN_IF_ERROR(LoadShards("ckpt", fresh, plan, *comm));
//
// SaveShards (collective over `comm`, the communicator the ShardedTensors were sharded over):
//  1. Every rank checks its slots locally (data present, host memory, no '#' in names), then all
//     agree on every parameter's name, global shape, dtype, requires_grad and bound spec (the
//     engine's agreement, AgreeOnParameters): a plain Tensor slot is a replicated parameter and
//     must be alike on every rank. Disagreements are kInvalidArgument on every rank, naming the
//     ranks and the parameter's field.
//  2. Every rank prepares DIR (OutputDirectory::Prepare: created if missing; only shardkit's own
//     output may be in it — a DCP checkpoint torch wrote is refused — which is replaced as a
//     whole); rank 0 takes DIR/.shardkit.lock (held until SaveShards returns, then removed) and
//     chooses where the files go: DIR, or beside a complete earlier output, which stays until the
//     commit (OutputDirectory::Begin). That place and rank 0's `metadata` reach every rank (one
//     AllGather).
//  3. Every rank writes rank-RRRRR.safetensors there (ShardDirOutput::CreateRankFile: its
//     shards, named by ShardTensorNames; replicated parameters whole in every file; rank 0's
//     `metadata` and DCP_SHARDING_INFO, the file's offsets, as __metadata__: RankFileMetadata)
//     straight from the tensors' memory — a non-contiguous tensor through contiguous copies of at
//     most memory_bytes — then fsyncs and renames it (os::AtomicFile).
//  4. One status round; then rank 0 writes index.json (strategy "save", src_rank 0, `metadata`;
//     kDcp: .metadata, with `items`) and commits (the swap over an earlier output), and one more
//     status round reports its outcome on every rank. A failure before the commit removes what
//     was written and leaves DIR as it was: an earlier save stays whole and loadable.
// `shardkit gather DIR` then gives the full checkpoint; `inspect` and `reshard` read DIR too.
//
// LoadShards (collective over `comm`): `module` holds, on every rank, a slot for each parameter
// to load — a Tensor (meta is fine: its data is not read) or a ShardedTensor — whose global shape
// and dtype must be DIR's. `plan` decides the new layout over `comm`'s world (ShardModule's rules:
// first matching rule, else replicated), whatever DIR's world size and layout were.
//  1. Every rank opens DIR (ShardDirSource: index.json validated, every rank file checked) and
//     checks the module against it; then all agree on the plan's layout (AgreeOnPlan).
//  2. Every rank allocates its new shards (host memory) and reads their bytes from DIR's old
//     shards (ShardDirSource::ReadBytes, reshard's range reads: a read touches only the old shards
//     it overlaps), long pieces straight into place, short ones through two staging buffers
//     within memory_bytes, read together only across small gaps (TensorBytesReader::Want: at
//     most 1.25 × the wanted bytes per read, or gaps shorter than a page). A replicated
//     parameter is read from DIR's src_rank copy, as `gather` does.
//  3. One status round (the commit); only then is every slot replaced — a ShardedTensor of the
//     new shards (a sharded parameter), or a fresh Tensor (a replicated one), requires_grad as
//     the slot had it. On failure no slot changes on any rank.
// LoadShards takes no lock: like `gather`, it does not guard against a writer rewriting DIR (a
// writer removes index.json first; a rank file resized or replaced after opening is
// kInvalidArgument).
// Both: one deadline (options.call) bounds the whole call; a local failure never returns early,
// every rank returns the same error; transport errors as the Communicator's.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SAVE_SHARDS_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SAVE_SHARDS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/engine/module.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/stream/memory_budget.h"
#include "specs/plan.h"

namespace shardkit::checkpoint {

struct SaveShardsOptions {
  // Staging for a non-contiguous tensor's bytes (> 0); contiguous ones are written from their
  // memory. As `shard --memory-mib`, 512 MiB.
  int64_t memory_bytes = kDefaultMemoryBytes;
  // index.json's "metadata" and every rank file's __metadata__ (restored by `gather`); rank 0's
  // is written, whatever the other ranks pass. A DCP_SHARDING_INFO key in it is index.json's; the
  // rank files' is their own (RankFileMetadata).
  std::map<std::string, std::string> metadata;
  // kDcp: DIR becomes a PyTorch DCP checkpoint that torch's dcp.load reads (every rank writes
  // __R_0.distcp, its shards as torch.save archives, replicated parameters once on rank 0;
  // rank 0 writes .metadata last, in place of index.json; `metadata` has no place in it and is
  // not written). Every rank must be given the same format.
  OutputFormat format = OutputFormat::kShardkit;
  // kDcp only: non-tensor items written beside the tensors, by key — each the bytes of a
  // torch.save archive of a Python object (an optimizer's param_groups entry, a step counter), as
  // LoadShardsOptions::items gives them back; rank 0's are written, once. dcp.load of the state
  // dict they came from finds them under their keys. Keys must not be parameter names.
  std::map<std::string, std::string> items;
  CallOptions call;  // deadline of the whole call
};

// Collective. Errors (the same on every rank): kInvalidArgument for items with the default format
// or with a parameter's name, a slot without data (meta) or
// not in host memory, a '#' in a name, a ShardedTensor whose shards are not its spec's layout
// over `comm`, ranks disagreeing on names, shapes, dtypes or specs, memory_bytes <= 0, or a DIR
// that cannot be created, holds foreign files or is locked by another writer; kUnavailable for
// I/O errors writing the files (naming the file); transport errors as the Communicator's.
[[nodiscard]] absl::Status SaveShards(const std::string& dir, const Module& module,
                                      Communicator& comm, const SaveShardsOptions& options = {});

// What one rank's LoadShards did, for callers and tests that check its reads.
struct LoadShardsStats {
  int64_t files_read = 0;  // DIR's rank files its reads touched (ShardDirSource::files_read)
  int64_t bytes_read = 0;  // bytes it pread from them (ShardDirSource::bytes_read)
};

struct LoadShardsOptions {
  // Parameters of DIR that `module` does not hold are skipped; by default they are an error
  // (a module that would silently miss part of a checkpoint is usually a mistake).
  bool allow_unused = false;
  // The staging buffers for short pieces (> 0): each gets SplitBudget(memory_bytes, 2).staging.
  int64_t memory_bytes = kDefaultMemoryBytes;
  CallOptions call;                  // deadline of the whole call
  LoadShardsStats* stats = nullptr;  // filled in for this rank on success, when set
  // When set, filled on success with DIR's non-tensor items (a DCP checkpoint's: an optimizer's
  // param_groups, a step counter), by key, their bytes as saved: a torch.save archive each, which
  // shardkit never unpickles; empty for a shard directory. Pass them to SaveShardsOptions::items.
  std::map<std::string, std::string>* items = nullptr;
};

// Collective. DIR is a shard directory or a DCP checkpoint (its non-tensor items are not a
// module's and are skipped). Errors (the same on every rank): kNotFound if DIR does not exist,
// has no index.json (nor DCP metadata) or lacks a rank file (a .distcp file); kInvalidArgument for
// an invalid shard directory, a module parameter DIR lacks, another shape or dtype than DIR's
// (naming the parameter and both), a DIR parameter the module lacks (unless allow_unused), a plan
// that does not bind or placements on devices other than cpu, ranks disagreeing (as AgreeOnPlan),
// memory_bytes <= 0, a rank file cut short, resized or replaced; kUnavailable for I/O errors;
// kResourceExhausted if shards cannot be allocated; transport errors as the Communicator's. On any
// error `module` is unchanged.
[[nodiscard]] absl::Status LoadShards(const std::string& dir, Module& module,
                                      const specs::Plan& plan, Communicator& comm,
                                      const LoadShardsOptions& options = {});

// A Module of meta tensors with each slot's global shape, dtype and requires_grad (a
// ShardedTensor's global ones), in `module`'s order: what SaveShards and LoadShards agree on.
// Their first local step: `memory_bytes` is their options' budget.
// Errors: kInvalidArgument if memory_bytes <= 0; as Tensor::Meta, naming the parameter.
[[nodiscard]] absl::StatusOr<Module> GlobalMetaModule(const Module& module, int64_t memory_bytes);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SAVE_SHARDS_H_
