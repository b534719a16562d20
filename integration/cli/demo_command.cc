// `shardkit demo [--nproc 4] [--backend gloo] [--timeout S]`: the main job on the embedded default.
// A synthetic model is sharded from rank 0 across local ranks with the built-in plan, gathered
// back and verified (integration/demo/). The summary goes to stdout, progress to stderr; exit 0
// only if verification passed.
//
// Without a launcher it starts --nproc ranks of this binary through `shardkit launch` (each
// rank's lines prefixed `[rank R] `), has rank 0 write the summary into a temporary file and
// prints it unprefixed, followed by the total wall time. Under a launcher (`shardkit launch --
// shardkit demo`, torchrun, mpirun, srun: UnderLauncher) it is one rank, rank 0 printing the
// summary itself, and --nproc is an error.
//
// --summary FILE sends the summary (with the total time, when launching) to FILE instead of
// stdout, written atomically. FILE must pass formats::CheckOutputFile as a text output: nothing
// there, an empty file, or an earlier summary (it begins with kDemoSummaryStart) — anything else is
// exit 2 before any rank starts (under a launcher every rank checks, before connecting).
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/env.h"
#include "core/base/status_macros.h"
#include "core/comm/connect.h"
#include "core/os/files.h"
#include "core/os/temp_dir.h"
#include "integration/cli/commands.h"
#include "integration/cli/demo_summary.h"
#include "integration/cli/flags.h"
#include "integration/cli/relaunch.h"
#include "integration/demo/demo_rank.h"
#include "integration/formats/output_file/output_file.h"

namespace shardkit::cli {
namespace {

constexpr char kCommand[] = "shardkit demo";

constexpr RankFlagsUse kRanks = {
    .nproc_help = "number of local ranks to start", .nproc_default = 4, .nproc_max = 64};

struct DemoFlags {
  RankFlags ranks{kRanks};
  std::string summary;  // rank 0 writes the summary here instead of stdout
};

FlagParser DemoFlagParser(DemoFlags* out) {
  FlagParser flags(kCommand, "[--nproc N] [--backend B] [--timeout S] [--summary FILE]");
  AddRankFlags(flags, &out->ranks);
  flags.AddString("summary", &out->summary,
                  "write the summary to this file instead of stdout (a new file, an empty one or "
                  "an earlier summary; how --nproc prints it without rank prefixes) "
                  "(default: stdout)");
  return flags;
}

// What may stand at --summary FILE: nothing, an empty file, or an earlier summary.
absl::Status CheckSummaryPath(const std::string& path) {
  return formats::CheckOutputFile(path, {.name = "--summary",
                                         .existing = formats::ExistingOutput::kText,
                                         .text_signature = kDemoSummaryStart,
                                         .text_kind = "an earlier summary"});
}

// The summary to stdout, or atomically to --summary FILE. Errors: as os::WriteFileAtomically.
absl::Status PrintSummary(const DemoFlags& flags, const std::string& text) {
  if (!flags.summary.empty()) return os::WriteFileAtomically(flags.summary, text);
  std::cout << text << std::flush;
  return absl::OkStatus();
}

// Records which flags were given. Errors: kInvalidArgument for a --timeout that is not positive,
// --nproc under a launcher, or a --summary FILE that CheckSummaryPath refuses.
absl::Status CheckDemoFlags(const FlagParser& parser, DemoFlags* flags) {
  SHARDKIT_RETURN_IF_ERROR(CheckRankFlags(parser, &flags->ranks));
  if (flags->ranks.nproc_set) {
    SHARDKIT_RETURN_IF_ERROR(CheckNprocAllowed("each process is one rank"));
  }
  if (!flags->summary.empty()) return CheckSummaryPath(flags->summary);
  return absl::OkStatus();
}

// One rank: connect (flags beat the environment), run, and on rank 0 write the summary.
// Returns the exit status.
int RunDemoRankCommand(const DemoFlags& flags) {
  absl::StatusOr<ConnectOptions> connect = ConnectOptionsFor(flags.ranks);
  if (!connect.ok()) return ReportError(kCommand, connect.status());
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Connect(*connect);
  if (!comm.ok()) return ReportError(kCommand, comm.status());
  absl::StatusOr<demo::DemoReport> report = demo::RunDemoRank(
      **comm, {.device = demo::DemoDevice(**comm, connect->local_rank), .progress = &std::cerr});
  if (!report.ok()) return ReportError(kCommand, report.status());
  if ((*comm)->rank() == 0) {
    if (absl::Status s = PrintSummary(flags, FormatDemoSummary(*report)); !s.ok()) {
      return ReportError(kCommand, s);
    }
  }
  if (report->verified()) return 0;
  if ((*comm)->rank() == 0) {
    std::cerr << kCommand << ": verification failed: the gathered model differs from the original"
              << std::endl;
  }
  return 1;
}

// Starts flags.nproc ranks of this binary and prints rank 0's summary and the total time.
int LaunchDemo(const DemoFlags& flags) {
  os::TempDir dir;
  if (absl::Status s = dir.Create("shardkit-demo"); !s.ok()) return ReportError(kCommand, s);
  const std::string summary_path = dir.path() + "/summary.txt";
  launch::LaunchOptions options;
  ApplyRankFlags(flags.ranks, options);
  const absl::Time start = absl::Now();
  absl::StatusOr<int> exit_code = LaunchSelf(options, {"demo", "--summary", summary_path});
  if (!exit_code.ok()) return ReportError(kCommand, exit_code.status());
  std::ifstream summary(summary_path);
  if (summary) {
    std::ostringstream text;
    text << summary.rdbuf()
         << absl::StrFormat(
                "total time: %.2f s (wall clock, starting %d rank processes included)\n",
                absl::ToDoubleSeconds(absl::Now() - start), flags.ranks.nproc);
    if (absl::Status s = PrintSummary(flags, text.str()); !s.ok()) return ReportError(kCommand, s);
  }
  return *exit_code;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  DemoFlags flags;
  FlagParser parser = DemoFlagParser(&flags);
  const ParseResult parsed = ParseCommand(parser, args, Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = CheckDemoFlags(parser, &flags); !s.ok()) return ReportError(kCommand, s);
  return UnderLauncher() ? RunDemoRankCommand(flags) : LaunchDemo(flags);
}

}  // namespace shardkit::cli
