// The `shardkit` command-line tool. docs/cli.md describes the contract.
#include <csignal>
#include <string>
#include <vector>

#include "integration/cli/commands.h"

int main(int argc, char** argv) {
  // A rank writing to a peer that died must get EPIPE, not be killed by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  return shardkit::cli::RunShardkit(args);
}
