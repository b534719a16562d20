// The `shardkit` command-line tool. docs/cli.md describes the contract.
#include <csignal>
#include <string>
#include <vector>

#include "core/os/interrupt.h"
#include "integration/cli/commands.h"

int main(int argc, char** argv) {
  // A rank writing to a peer that died must get EPIPE, not be killed by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // SIGINT, SIGTERM, SIGHUP: temporary files removed, one line from the source about its output,
  // then death by the signal (exit status 128 + signal).
  shardkit::os::InstallInterruptHandlers();
  std::vector<std::string> args(argv + 1, argv + argc);
  return shardkit::cli::RunShardkit(args);
}
