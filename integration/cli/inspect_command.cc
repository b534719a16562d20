// `shardkit inspect PATH`: a table of a checkpoint (a safetensors file, a Hugging Face index or
// folder), a shard directory or a PyTorch DCP checkpoint on stdout, and nothing else
// (checkpoint::InspectPath, laid out by FormatInspection); its warnings go to stderr.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/inspect.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"
#include "integration/report/inspect_table.h"

namespace shardkit::cli {

int RunInspect(const std::vector<std::string>& args) {
  constexpr char kCommand[] = "shardkit inspect";
  FlagParser flags(kCommand,
                   "PATH (a .safetensors file, a Hugging Face *.safetensors.index.json or model "
                   "folder, a shard directory, or a PyTorch DCP checkpoint folder)");
  const ParseResult parsed = ParseCommand(flags, args, Positionals::ExactlyOne("PATH"));
  if (parsed.done()) return parsed.exit_code();
  std::vector<std::string> warnings;
  absl::StatusOr<checkpoint::Inspection> inspection =
      checkpoint::InspectPath(parsed.positional()[0], &warnings);
  if (!inspection.ok()) return ReportError(kCommand, inspection.status());
  for (const std::string& warning : warnings) std::cerr << warning << "\n";
  std::cout << report::FormatInspection(*inspection) << std::flush;
  return 0;
}

}  // namespace shardkit::cli
