// `shardkit spec check FILE.json [--shape 12,4] [--world N]`: validates a spec or a plan.
//
// stdout, and nothing else: line 1 the canonical JSON (the bound form when --shape is given),
// line 2 its fingerprint, then with --shape a table of the shards (index, rank, offsets, sizes).
// Exit 0 if valid, 2 if invalid (the error is the first line on stderr).
//
// `shardkit spec check PLAN.json --checkpoint CK --world N [--strict] [--fp8-block B]
// [--allow-misaligned-scales]`: the dry run of `shard` (checkpoint::DryRun) — stdout the table
// `inspect` would print of the output (FormatInspection), with each parameter's rule; stderr the
// warnings `shard` would print; exit 2 for what `shard` would refuse before moving data.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "integration/checkpoint/dry_run.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/cli/inspect_table.h"
#include "specs/fingerprint.h"
#include "specs/layout.h"
#include "specs/placement.h"
#include "specs/plan.h"
#include "specs/spec_json.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit spec check";
constexpr char kUsage[] =
    "FILE.json [--shape 12,4] [--world N] | PLAN.json --checkpoint CK --world N [--strict] "
    "[--allow-replicated-only] [--fp8-block B] [--allow-misaligned-scales]";

struct CheckOptions {
  std::string path;
  std::optional<Shape> shape;
  std::optional<int64_t> world;
  checkpoint::DryRunOptions dry_run;  // with --checkpoint
};

absl::StatusOr<Shape> ParseShape(const std::string& text) {
  Shape shape;
  if (text.empty()) return shape;  // --shape "" is a 0-d tensor
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int64_t dim = 0;
    if (!absl::SimpleAtoi(piece, &dim) || dim < 0 || piece.empty() || piece[0] == '+') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shape: expected non-negative integers separated by commas, got \"", text, "\""));
    }
    shape.push_back(dim);
  }
  return shape;
}

std::string ShardTable(const std::vector<specs::ShardMetadata>& shards) {
  size_t offsets_width = 7;  // "offsets"
  for (const specs::ShardMetadata& s : shards) {
    offsets_width = std::max(offsets_width, ShapeToString(s.offsets).size());
  }
  std::string out = absl::StrFormat("%-5s  %-4s  %-*s  %s\n", "index", "rank",
                                    static_cast<int>(offsets_width), "offsets", "sizes");
  for (size_t i = 0; i < shards.size(); ++i) {
    absl::StrAppendFormat(&out, "%-5d  %-4d  %-*s  %s\n", i, shards[i].placement.rank(),
                          static_cast<int>(offsets_width), ShapeToString(shards[i].offsets),
                          ShapeToString(shards[i].sizes));
  }
  return out;
}

absl::StatusOr<std::string> CheckSpec(const specs::ShardingSpec& spec,
                                      const CheckOptions& options) {
  if (!options.shape.has_value()) {
    if (options.world.has_value()) {
      SHARDKIT_RETURN_IF_ERROR(specs::ValidateRanks(spec, *options.world));
    }
    const std::string canonical = specs::CanonicalJson(spec);
    return absl::StrCat(canonical, "\n", specs::Fingerprint(canonical), "\n");
  }
  SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec bound,
                            specs::Bind(spec, *options.shape, options.world));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<specs::ShardMetadata> shards,
                            specs::BuildMetadata(bound, *options.shape));
  const std::string canonical = specs::CanonicalJson(bound);
  return absl::StrCat(canonical, "\n", specs::Fingerprint(canonical), "\n", ShardTable(shards));
}

absl::StatusOr<std::string> CheckPlan(const specs::Plan& plan, const CheckOptions& options) {
  if (options.shape.has_value()) {
    return absl::InvalidArgumentError(
        "--shape applies to a spec, not to a plan (its rules cover many parameters)");
  }
  if (options.world.has_value()) {
    if (plan.src_rank >= *options.world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "src_rank ", plan.src_rank, " is outside the world of ", *options.world, " ranks"));
    }
    for (size_t i = 0; i < plan.rules.size(); ++i) {
      SHARDKIT_RETURN_IF_ERROR(Annotate(CheckSpec(plan.rules[i].spec, options).status(),
                                        absl::StrCat("rules[", i, "].spec")));
    }
  }
  const std::string canonical = specs::CanonicalJson(plan);
  return absl::StrCat(canonical, "\n", specs::Fingerprint(canonical), "\n");
}

absl::StatusOr<std::string> Check(const CheckOptions& options, std::vector<std::string>* warnings) {
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, os::ReadWholeFile(options.path));
  absl::StatusOr<specs::SpecOrPlan> parsed = specs::ParseSpecOrPlan(text);
  if (!parsed.ok()) return Annotate(parsed.status(), options.path);
  if (!options.dry_run.checkpoint_path.empty()) {
    if (!std::holds_alternative<specs::Plan>(*parsed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.path, ": --checkpoint applies to a plan (an object with \"rules\"), not a spec"));
    }
    SHARDKIT_ASSIGN_OR_RETURN(checkpoint::Inspection table,
                              checkpoint::DryRun(options.dry_run, warnings));
    return FormatInspection(table);
  }
  absl::StatusOr<std::string> out =
      std::holds_alternative<specs::Plan>(*parsed)
          ? CheckPlan(std::get<specs::Plan>(*parsed), options)
          : CheckSpec(std::get<specs::ShardingSpec>(*parsed), options);
  if (!out.ok()) return Annotate(out.status(), options.path);
  return out;
}

// --checkpoint needs --world and excludes --shape; --strict and the FP8 flags need --checkpoint.
// Errors: kInvalidArgument naming the flags.
absl::Status CheckDryRunFlags(const FlagParser& flags) {
  if (!flags.WasSet("checkpoint")) {
    for (const char* name :
         {"strict", "allow-replicated-only", "fp8-block", "allow-misaligned-scales"}) {
      if (flags.WasSet(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", name, " applies to the dry run of a plan on a checkpoint (--checkpoint CK)"));
      }
    }
    return absl::OkStatus();
  }
  if (flags.WasSet("shape")) {
    return absl::InvalidArgumentError(
        "--shape and --checkpoint exclude each other (the checkpoint gives every shape)");
  }
  return Require(flags, {"world"},
                 " with --checkpoint (the number of ranks the plan is laid out for)");
}

int RunCheck(const std::vector<std::string>& args) {
  FlagParser flags(kCommand, kUsage);
  std::string shape_text;
  int64_t world = 0;
  CheckOptions options;
  checkpoint::DryRunOptions& dry_run = options.dry_run;
  flags.AddString("shape", &shape_text,
                  "global shape of a spec's tensor, comma-separated: print the bound form and "
                  "the shards (default: the spec as written)");
  flags.AddInt("world", &world,
               "world size: expand {\"ranks\": \"all\"}, check the ranks (default: not checked)", 1,
               specs::kMaxWorldSize);
  flags.AddString("checkpoint", &dry_run.checkpoint_path,
                  "dry run of `shard`: bind the plan to this checkpoint's header (any form "
                  "`shard --checkpoint` takes, or a shard directory as `reshard --in`) for --world "
                  "ranks; print the table `inspect` would print of the output (default: none)");
  AddStrictFlag(flags, &dry_run.strict, &dry_run.allow_replicated_only);
  AddFp8Flags(flags, &dry_run.fp8.block, &dry_run.fp8.allow_misaligned);
  flags.SetHelpNotes(kPlanHelp);
  const ParseResult parsed = ParseCommand(flags, args, Positionals::ExactlyOne("FILE.json"));
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = CheckDryRunFlags(flags); !s.ok()) return ReportError(kCommand, s);
  options.path = dry_run.plan_path = parsed.positional()[0];
  if (flags.WasSet("world")) options.world = dry_run.world_size = world;
  if (flags.WasSet("shape")) {
    absl::StatusOr<Shape> shape = ParseShape(shape_text);
    if (!shape.ok()) return ReportError(kCommand, shape.status());
    options.shape = *shape;
  }
  std::vector<std::string> warnings;
  absl::StatusOr<std::string> out = Check(options, &warnings);
  const int code = out.ok() ? 0 : ReportError(kCommand, out.status());
  for (const std::string& warning : warnings) std::cerr << warning << "\n";
  if (out.ok()) std::cout << *out << std::flush;
  return code;
}

}  // namespace

int RunSpec(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << "usage: " << kCommand << " " << kUsage << "\n";
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h") return RunCheck(args);  // its only subcommand
  if (args[0] != "check") {
    return ReportError("shardkit spec",
                       absl::InvalidArgumentError(
                           absl::StrCat("unknown subcommand \"", args[0], "\" (expected check)")));
  }
  return RunCheck(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace shardkit::cli
