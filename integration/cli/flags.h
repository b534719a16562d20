// A small hand-written flag parser for `shardkit` subcommands.
//
// absl's flag parser is not used: it exits 1 on a bad flag (the CLI contract says 2) and its flags
// are global. Each subcommand declares its own flags:
//
//   FlagParser flags("shardkit spec check", "FILE.json [--shape 12,4] [--world N]");
//   std::string shape;
//   flags.AddString("shape", &shape, "global shape, comma-separated");
//   std::vector<std::string> positional;
//   if (absl::Status s = flags.Parse(args, &positional); !s.ok()) return ReportError(s);
//   if (flags.help_requested()) { std::cout << flags.Help(); return 0; }
//
// Accepted forms: `--name value`, `--name=value`, boolean `--name`; `--` ends the flags (the rest
// is positional); `-h`/`--help` request help.
#ifndef SHARDKIT_INTEGRATION_CLI_FLAGS_H_
#define SHARDKIT_INTEGRATION_CLI_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

namespace shardkit::cli {

class FlagParser {
 public:
  FlagParser(std::string command, std::string usage);

  void AddString(std::string name, std::string* out, std::string help);
  // Integers in decimal; values outside [min, max] are errors.
  void AddInt(std::string name, int64_t* out, std::string help, int64_t min = INT64_MIN,
              int64_t max = INT64_MAX);
  void AddDouble(std::string name, double* out, std::string help);
  void AddBool(std::string name, bool* out, std::string help);

  // Parses `args` (everything after the subcommand). Positional arguments are appended to
  // `positional`. Errors: kInvalidArgument naming the flag (unknown flag, missing or bad value).
  [[nodiscard]] absl::Status Parse(const std::vector<std::string>& args,
                                   std::vector<std::string>* positional);

  bool help_requested() const { return help_requested_; }
  // True if the flag appeared on the command line (for flag > plan > default precedence).
  bool WasSet(const std::string& name) const { return set_.contains(name); }
  std::string Help() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
    int64_t min = 0;
    int64_t max = 0;
  };

  const Flag* Find(const std::string& name) const;
  absl::Status Assign(const Flag& flag, const std::string& value);

  std::string command_;
  std::string usage_;
  std::vector<Flag> flags_;
  absl::flat_hash_set<std::string> set_;
  bool help_requested_ = false;
};

// Exit status for a failed command per the CLI contract: 2 if the request is invalid (the user
// fixes it by changing arguments or inputs: kInvalidArgument, kNotFound, kAlreadyExists,
// kOutOfRange, kPermissionDenied), 1 otherwise.
int ExitCodeFor(const absl::Status& status);

// Prints "shardkit <command>: <message>" as the first line on stderr; returns ExitCodeFor(status).
int ReportError(const std::string& command, const absl::Status& status);

}  // namespace shardkit::cli

#endif  // SHARDKIT_INTEGRATION_CLI_FLAGS_H_
