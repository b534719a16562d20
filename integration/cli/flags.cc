#include "integration/cli/flags.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"

namespace shardkit::cli {

void AddMemoryFlag(FlagParser& flags, int64_t* mib) {
  flags.AddInt("memory-mib", mib,
               absl::StrCat("at most M MiB of tensor data in memory on any rank at once; rounds "
                            "are sized for speed within it (default ",
                            kDefaultMemoryMib, ")"),
               1, int64_t{1} << 30);
}

void AddFp8Flags(FlagParser& flags, int64_t* block, bool* allow_misaligned) {
  flags.AddInt("fp8-block", block,
               absl::StrCat("block size B of FP8 weights' X_scale_inv scales: cuts of an F8_* "
                            "tensor must fall on multiples of B, its scales cut alike (default ",
                            *block, ")"),
               1, int64_t{1} << 30);
  flags.AddBool("allow-misaligned-scales", allow_misaligned,
                "warn instead of refusing a plan that cuts an FP8 weight off its scale blocks");
}

void AddStrictFlag(FlagParser& flags, bool* strict, bool* allow_replicated_only) {
  flags.AddBool("strict", strict,
                "refuse (exit 2) a plan with a rule that matches no parameter or whose every "
                "match an earlier rule took (default: off, a warning)");
  flags.AddBool("allow-replicated-only", allow_replicated_only,
                "accept a plan that shards nothing, every rank getting every parameter whole "
                "(default: such a plan is refused, exit 2)");
}

void AddSelectionFlags(FlagParser& flags, checkpoint::TensorSelection* select, bool strip_prefix) {
  flags.AddStringList("include", &select->include,
                      "read only the tensors whose names match GLOB (repeatable: any of them), in "
                      "the plan's pattern syntax ('*' within a dotted segment, '**' whole "
                      "segments), e.g. 'model.**' (default: every tensor)");
  flags.AddStringList("exclude", &select->exclude,
                      "leave out the tensors whose names match GLOB (repeatable), e.g. "
                      "'optimizer.**'; a DCP checkpoint's non-tensor items are picked by the same "
                      "patterns");
  if (!strip_prefix) return;
  flags.AddString("strip-prefix", &select->strip_prefix,
                  "drop PREFIX from the names that begin with it, e.g. 'model.' (default: names "
                  "as saved)");
  flags.AddBool("strict", &select->strict,
                "a --include or --exclude pattern that matches nothing, or a name without "
                "--strip-prefix's PREFIX, is an error, not a warning");
}

void AddFormatFlag(FlagParser& flags, std::string* format, std::string_view help) {
  *format = "shardkit";
  flags.AddString("format", format, std::string(help));
}

absl::StatusOr<checkpoint::OutputFormat> ParseFormatFlag(const std::string& text) {
  return ForFlag("format", checkpoint::ParseOutputFormat(text));
}

std::string BackendDefaultHelp() {
  return absl::StrCat("(default: $", env::kBackend, ", else ", env::kDefaultBackend, ")");
}

std::string TimeoutDefaultHelp() {
  return absl::StrCat("(default: $", env::kTimeout, ", else ",
                      absl::ToInt64Seconds(env::kDefaultTimeout), ")");
}

namespace {

std::string NprocHelp(const RankFlagsUse& use) {
  if (use.nproc_required) return absl::StrCat(use.nproc_help, " (required)");
  if (use.nproc_default > 0)
    return absl::StrCat(use.nproc_help, " (default ", use.nproc_default, ")");
  return use.nproc_help;
}

}  // namespace

void AddRankFlags(FlagParser& flags, RankFlags* out, std::initializer_list<RankFlag> which) {
  const RankFlagsUse& use = out->use;
  for (RankFlag flag : which) {
    switch (flag) {
      case RankFlag::kNproc:
        flags.AddInt("nproc", &out->nproc, NprocHelp(use), 1, use.nproc_max);
        break;
      case RankFlag::kBackend:
        flags.AddString("backend", &out->backend,
                        absl::StrCat(use.backend_help, " ", BackendDefaultHelp()));
        break;
      case RankFlag::kTimeout:
        flags.AddDouble("timeout", &out->timeout_s,
                        absl::StrCat(use.timeout_help, " ", TimeoutDefaultHelp()));
        break;
    }
  }
}

absl::Status CheckRankFlags(const FlagParser& flags, RankFlags* out) {
  if (out->use.nproc_required) SHARDKIT_RETURN_IF_ERROR(Require(flags, {"nproc"}));
  out->nproc_set = flags.WasSet("nproc");
  out->backend_set = flags.WasSet("backend");
  out->timeout_set = flags.WasSet("timeout");
  if (out->timeout_set && !(out->timeout_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout must be > 0 seconds, got ", out->timeout_s));
  }
  return absl::OkStatus();
}

bool ProgressWanted() {
  const char* progress = std::getenv(env::kProgress);
  if (progress != nullptr) return std::string_view(progress) == "1";
  return ::isatty(STDERR_FILENO) != 0;
}

}  // namespace shardkit::cli
