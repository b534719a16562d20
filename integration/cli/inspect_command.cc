// `shardkit inspect PATH`: a table of a safetensors file or a shard directory on stdout, and
// nothing else (checkpoint::InspectPath); its warnings go to stderr.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/checkpoint/inspect.h"
#include "integration/cli/commands.h"
#include "integration/cli/flags.h"

namespace shardkit::cli {

int RunInspect(const std::vector<std::string>& args) {
  constexpr char kCommand[] = "shardkit inspect";
  FlagParser flags(kCommand, "PATH (a .safetensors file or a shard directory)");
  const ParseResult parsed = ParseCommand(flags, args, Positionals::ExactlyOne("PATH"));
  if (parsed.done()) return parsed.exit_code();
  std::vector<std::string> warnings;
  absl::StatusOr<std::string> table = checkpoint::InspectPath(parsed.positional()[0], &warnings);
  if (!table.ok()) return ReportError(kCommand, table.status());
  for (const std::string& warning : warnings) std::cerr << warning << "\n";
  std::cout << *table << std::flush;
  return 0;
}

}  // namespace shardkit::cli
