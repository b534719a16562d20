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
// The checks are checkpoint::CheckSpecFile's, the text report::FormatSpecCheck's.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "integration/checkpoint/spec_check.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/report/spec_text.h"
#include "specs/placement.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit spec check";
constexpr char kUsage[] =
    "FILE.json [--shape 12,4] [--world N] | PLAN.json --checkpoint CK --world N [--strict] "
    "[--allow-replicated-only] [--fp8-block B] [--allow-misaligned-scales]";

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

// --strict and the FP8 flags need --checkpoint (CheckSpecFile checks --world and --shape with it).
// Errors: kInvalidArgument naming the flag.
absl::Status CheckDryRunFlags(const FlagParser& flags) {
  if (flags.WasSet("checkpoint")) return absl::OkStatus();
  for (const char* name :
       {"strict", "allow-replicated-only", "fp8-block", "allow-misaligned-scales"}) {
    if (flags.WasSet(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, " applies to the dry run of a plan on a checkpoint (--checkpoint CK)"));
    }
  }
  return absl::OkStatus();
}

int RunCheck(const std::vector<std::string>& args) {
  FlagParser flags(kCommand, kUsage);
  std::string shape_text;
  int64_t world = 0;
  checkpoint::SpecCheckOptions options;
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
  options.path = parsed.positional()[0];
  if (flags.WasSet("world")) options.world = world;
  if (flags.WasSet("shape")) {
    absl::StatusOr<Shape> shape = ParseShape(shape_text);
    if (!shape.ok()) return ReportError(kCommand, shape.status());
    options.shape = *shape;
  }
  std::vector<std::string> warnings;
  absl::StatusOr<checkpoint::SpecCheck> out = checkpoint::CheckSpecFile(options, &warnings);
  const int code = out.ok() ? 0 : ReportError(kCommand, out.status());
  for (const std::string& warning : warnings) std::cerr << warning << "\n";
  if (out.ok()) std::cout << report::FormatSpecCheck(*out) << std::flush;
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
