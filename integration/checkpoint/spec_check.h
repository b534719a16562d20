// CheckSpecFile: `shardkit spec check` as a library — a spec or a plan validated, in canonical
// form with its fingerprint; a spec bound to a shape with its shards; or a plan's dry run on a
// checkpoint (DryRun, dry_run.h). The CLI prints the result (integration/report/spec_text.h);
// the Python package returns it.
//
//   std::vector<std::string> warnings;
//   SHARDKIT_ASSIGN_OR_RETURN(SpecCheck check,
//                             CheckSpecFile({.path = "spec.json", .shape = Shape{12, 4},
//                                            .world = 4}, &warnings));
//   check.canonical;  // {"dim":0,"placements":[...]} bound to [12, 4]
//   check.shards;     // 4 ShardMetadata
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SPEC_CHECK_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SPEC_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/shape.h"
#include "integration/checkpoint/dry_run.h"
#include "integration/checkpoint/inspect.h"
#include "specs/shard_metadata.h"

namespace shardkit::checkpoint {

struct SpecCheckOptions {
  std::string path;       // the spec or plan file; names the input in messages
  std::string json_text;  // its text instead of the file's (a program's), when not empty
  // A spec's tensor shape: the bound form and its shards (a plan refuses it).
  std::optional<Shape> shape;
  // The world size: {"ranks": "all"} expanded, every rank checked (a plan: its src_rank and each
  // rule's spec). Required with a dry run.
  std::optional<int64_t> world;
  // dry_run.checkpoint_path set: the dry run of `shard` (a plan only; no shape). Its plan_path,
  // plan_json and world_size are taken from the fields above.
  DryRunOptions dry_run;
};

struct SpecCheck {
  bool plan = false;      // the input is a plan (an object with "rules"), else a spec
  std::string canonical;  // canonical JSON (a spec with `shape`: its bound form); not for a dry run
  std::string fingerprint;                                  // of `canonical`
  std::optional<std::vector<specs::ShardMetadata>> shards;  // a spec with `shape`: its shards
  std::optional<Inspection> dry_run;                        // the dry run's output table
};

// Errors: kNotFound for a missing file; kInvalidArgument naming the file and JSON path for an
// invalid spec or plan, a rank outside `world`, a shape the spec does not fit, a shape given for
// a plan, a dry run of a spec or without a world or with a shape; the dry run's (DryRun). The
// dry run's warnings (those `shard` would print) are appended to `warnings`.
[[nodiscard]] absl::StatusOr<SpecCheck> CheckSpecFile(const SpecCheckOptions& options,
                                                      std::vector<std::string>* warnings);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SPEC_CHECK_H_
