// The `shardkit` subcommands. Each lives in its own file and is listed once in commands.cc's
// table (kCommands), which RunShardkit dispatches on and --help prints.
// A command receives the arguments after its name and returns the process exit status
// (0 success, 2 invalid request, 1 anything else; see docs/cli.md).
#ifndef SHARDKIT_INTEGRATION_CLI_COMMANDS_H_
#define SHARDKIT_INTEGRATION_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace shardkit::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

// What `shard`, `reshard` and `spec` print after their flags (FlagParser::SetHelpNotes): a plan
// example and the rules of its patterns.
extern const char kPlanHelp[];

// The subcommands (one file each: launch_command.cc, ...).
int RunLaunch(const std::vector<std::string>& args);

// `shardkit shard`, `gather`, `inspect` (shard_command.cc, gather_command.cc,
// inspect_command.cc).
int RunShard(const std::vector<std::string>& args);
int RunReshard(const std::vector<std::string>& args);  // shard_command.cc too
int RunGather(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);

// `shardkit bench ...` (bench_command.cc).
int RunBench(const std::vector<std::string>& args);

// `shardkit spec ...` (spec_command.cc).
int RunSpec(const std::vector<std::string>& args);

// `shardkit demo` (demo_command.cc).
int RunDemo(const std::vector<std::string>& args);

// `shardkit --version` (version_command.cc): version, build id, the backends found.
int RunVersion(const std::vector<std::string>& args);

// Runs `shardkit ARGS...` (argv without the program name); returns the exit status.
int RunShardkit(const std::vector<std::string>& args);

}  // namespace shardkit::cli

#endif  // SHARDKIT_INTEGRATION_CLI_COMMANDS_H_
