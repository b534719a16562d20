// A small hand-written flag parser for shardkit's programs: the CLI's subcommands, the examples
// and the LibTorch adapter's programs. The flags several subcommands share are
// integration/cli/flags.h.
//
// absl's flag parser is not used: it exits 1 on a bad flag (the CLI contract says 2) and its flags
// are global. Each subcommand declares its own flags:
//
//   FlagParser flags("shardkit gather", "--in DIR --out OUT.safetensors");
//   std::string in;
//   flags.AddString("in", &in, "shard directory");
//   const ParseResult parsed = ParseCommand(flags, args, Positionals::None());
//   if (parsed.done()) return parsed.exit_code();  // help printed, or the error reported
//   absl::Status s = Require(flags, {"in"}, kSeeHelp);  // "--in is required (see --help)"
//   if (!s.ok()) return ReportError("shardkit gather", s);
//
// Accepted forms: `--name value`, `--name=value`, boolean `--name`; `--` ends the flags (the rest
// is positional); `-h`/`--help` request help.
#ifndef SHARDKIT_INTEGRATION_FLAGS_FLAGS_H_
#define SHARDKIT_INTEGRATION_FLAGS_FLAGS_H_

#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace shardkit::flags {

// How wide --help lines are made, where words allow.
inline constexpr size_t kHelpWidth = 100;

class FlagParser {
 public:
  FlagParser(std::string command, std::string usage);

  void AddString(std::string name, std::string* out, std::string help);
  // Repeatable: every occurrence appends its value, in command-line order.
  void AddStringList(std::string name, std::vector<std::string>* out, std::string help);
  // Integers in decimal; values outside [min, max] are errors.
  void AddInt(std::string name, int64_t* out, std::string help, int64_t min = INT64_MIN,
              int64_t max = INT64_MAX);
  void AddDouble(std::string name, double* out, std::string help);
  void AddBool(std::string name, bool* out, std::string help);
  // A positive byte count as ParseByteSize reads it (500MB, 2GiB, 1000000).
  void AddByteSize(std::string name, int64_t* out, std::string help);

  // Parses `args` (everything after the subcommand). Positional arguments are appended to
  // `positional`. Errors: kInvalidArgument naming the flag (unknown flag, missing or bad value).
  [[nodiscard]] absl::Status Parse(const std::vector<std::string>& args,
                                   std::vector<std::string>* positional);

  // Text printed after the flags in Help() (examples, rules of an input format); verbatim.
  void SetHelpNotes(std::string notes) { notes_ = std::move(notes); }

  const std::string& command() const { return command_; }
  bool help_requested() const { return help_requested_; }
  // True if the flag appeared on the command line (for flag > plan > default precedence).
  bool WasSet(const std::string& name) const { return set_.contains(name); }
  // "usage: COMMAND USAGE", then one line per flag: "--name METAVAR" and its help text (which
  // says its default), then the notes. A flag's METAVAR is the word that follows it in the usage
  // (`--out DIR` -> DIR, `[--strategy scatter|broadcast]` -> scatter|broadcast), else VALUE;
  // booleans have none. Lines are broken between words to fit kHelpWidth columns where they can.
  std::string Help() const;

 private:
  enum class Kind { kString, kStringList, kInt, kDouble, kBool, kByteSize };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
    int64_t min = 0;
    int64_t max = 0;
  };

  const Flag* Find(const std::string& name) const;
  std::string Metavariable(const Flag& flag) const;
  absl::Status Assign(const Flag& flag, const std::string& value);

  std::string command_;
  std::string usage_;
  std::vector<Flag> flags_;
  std::string notes_;
  absl::flat_hash_set<std::string> set_;
  bool help_requested_ = false;
};

// Exit status for a failed command per the CLI contract: 2 if the request is invalid (the user
// fixes it by changing arguments or inputs: kInvalidArgument, kNotFound, kAlreadyExists,
// kOutOfRange, kPermissionDenied), 1 otherwise.
int ExitCodeFor(const absl::Status& status);

// Prints "shardkit <command>: <message>" as the first line on `err` (stderr); returns
// ExitCodeFor(status).
int ReportError(const std::string& command, const absl::Status& status,
                std::ostream& err = std::cerr);

// The positional arguments a command takes besides its flags, and the words for a mismatch.
class Positionals {
 public:
  // None: the first one is the error `unexpected argument "ARG"`, followed by `hint`.
  static Positionals None(std::string hint = "");
  // Exactly one, called `name` (e.g. "PATH"): else `expected exactly one PATH (see --help)`.
  static Positionals ExactlyOne(const std::string& name);

  // Errors: kInvalidArgument, worded as above, if `args` is not what the command takes.
  [[nodiscard]] absl::Status Check(const std::vector<std::string>& args) const;

 private:
  Positionals(size_t count, std::string error) : count_(count), error_(std::move(error)) {}

  size_t count_;
  std::string error_;  // None: the hint; ExactlyOne: the whole message
};

// What ParseCommand did; `done()` means the command ends here with `exit_code()`.
class ParseResult {
 public:
  enum class Outcome {
    kParsed,  // the flags are assigned and positional() fits: go on
    kHelp,    // -h/--help: the help went to stdout; exit 0
    kError,   // an invalid request: "COMMAND: MESSAGE" went to stderr; exit 2
  };

  ParseResult(Outcome outcome, absl::Status status, std::vector<std::string> positional)
      : outcome_(outcome), status_(std::move(status)), positional_(std::move(positional)) {}

  Outcome outcome() const { return outcome_; }
  bool done() const { return outcome_ != Outcome::kParsed; }
  // 0 for kParsed and kHelp, ExitCodeFor(status()) (2) for kError.
  int exit_code() const { return ExitCodeFor(status_); }
  // The error for kError; OK otherwise.
  const absl::Status& status() const { return status_; }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  Outcome outcome_;
  absl::Status status_;
  std::vector<std::string> positional_;
};

// The head every subcommand shares: parses `args` (everything after the subcommand's name) with
// `flags` and checks the positional arguments against `positionals`. Help requested before any
// bad flag wins: flags.Help() goes to `out`. An error goes to `err` as ReportError writes it.
[[nodiscard]] ParseResult ParseCommand(FlagParser& flags, const std::vector<std::string>& args,
                                       const Positionals& positionals,
                                       std::ostream& out = std::cout,
                                       std::ostream& err = std::cerr);

// `parsed`, or its error as "--NAME: <message>" (`name` without "--"): for a flag's value that is
// parsed after FlagParser (a strategy, a dtype), so that the error names the flag.
template <typename T>
[[nodiscard]] absl::StatusOr<T> ForFlag(std::string_view name, absl::StatusOr<T> parsed) {
  if (parsed.ok()) return parsed;
  return absl::Status(parsed.status().code(),
                      absl::StrCat("--", absl::string_view(name.data(), name.size()), ": ",
                                   parsed.status().message()));
}

// What Require's messages (and others pointing at the help) end with.
inline constexpr char kSeeHelp[] = " (see --help)";

// Checks that every flag in `names` (written without "--") appeared on the command line.
// Errors: kInvalidArgument "--a is required", or for several names, when any of them is missing,
// "--a and --b are required" ("--a, --b and --c ..."); followed by `suffix`.
[[nodiscard]] absl::Status Require(const FlagParser& flags,
                                   std::initializer_list<std::string> names,
                                   const std::string& suffix = "");

// A positive number of bytes: ASCII digits, optionally followed by a unit — KB, MB, GB (10^3,
// 10^6, 10^9 bytes, as Hugging Face's max_shard_size) or KiB, MiB, GiB (2^10, 2^20, 2^30) — in any
// case ("500mb", "2GIB"), with nothing around them. Errors: kInvalidArgument (the message says
// what is wrong, without naming a flag) for an empty string, a sign, a fraction, a space, an
// unknown unit, zero, or a value above INT64_MAX bytes.
[[nodiscard]] absl::StatusOr<int64_t> ParseByteSize(std::string_view text);

}  // namespace shardkit::flags

#endif  // SHARDKIT_INTEGRATION_FLAGS_FLAGS_H_
