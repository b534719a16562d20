#include "integration/flags/flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardkit::flags {
namespace {

struct ByteUnit {
  std::string_view name;  // lower case
  int64_t bytes;
};
constexpr ByteUnit kByteUnits[] = {{"", 1},
                                   {"kb", 1000},
                                   {"mb", 1000 * 1000},
                                   {"gb", 1000 * 1000 * 1000},
                                   {"kib", int64_t{1} << 10},
                                   {"mib", int64_t{1} << 20},
                                   {"gib", int64_t{1} << 30}};
constexpr char kByteSizeForm[] =
    "expected a positive whole number of bytes, optionally followed by KB, MB, GB (10^3, 10^6, "
    "10^9 bytes) or KiB, MiB, GiB (2^10, 2^20, 2^30 bytes), in any case, e.g. 500MB";

// Why `text` (digits `number`, then `unit`, lower case) is not a byte size, when it is plain.
std::string_view ByteSizeProblem(std::string_view text, std::string_view number,
                                 std::string_view unit) {
  if (text.find_first_of(" \t\n") != std::string_view::npos) return "no spaces are accepted";
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) return "no sign is accepted";
  if (!unit.empty() && (unit[0] == '.' || unit[0] == ',')) return "fractions are not accepted";
  if (number.empty()) return "no digits";
  return "unknown unit";
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(std::string_view text) {
  const std::string_view number =
      text.substr(0, std::min(text.find_first_not_of("0123456789"), text.size()));
  const std::string_view rest = text.substr(number.size());
  const std::string unit = absl::AsciiStrToLower(absl::string_view(rest.data(), rest.size()));
  auto invalid = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("got \"", absl::string_view(text.data(), text.size()),
                     "\": ", absl::string_view(why.data(), why.size()), "; ", kByteSizeForm));
  };
  const ByteUnit* found = nullptr;
  for (const ByteUnit& u : kByteUnits) {
    if (u.name == unit) found = &u;
  }
  if (number.empty() || found == nullptr) return invalid(ByteSizeProblem(text, number, unit));
  uint64_t value = 0;
  if (!absl::SimpleAtoi(absl::string_view(number.data(), number.size()), &value) ||
      value > static_cast<uint64_t>(INT64_MAX / found->bytes)) {
    return invalid("more than 2^63 - 1 bytes");
  }
  if (value == 0) return invalid("zero is not a size");
  return static_cast<int64_t>(value) * found->bytes;
}

FlagParser::FlagParser(std::string command, std::string usage)
    : command_(std::move(command)), usage_(std::move(usage)) {}

void FlagParser::AddString(std::string name, std::string* out, std::string help) {
  flags_.push_back({std::move(name), Kind::kString, out, std::move(help)});
}

void FlagParser::AddStringList(std::string name, std::vector<std::string>* out, std::string help) {
  flags_.push_back({std::move(name), Kind::kStringList, out, std::move(help)});
}

void FlagParser::AddInt(std::string name, int64_t* out, std::string help, int64_t min,
                        int64_t max) {
  flags_.push_back({std::move(name), Kind::kInt, out, std::move(help), min, max});
}

void FlagParser::AddDouble(std::string name, double* out, std::string help) {
  flags_.push_back({std::move(name), Kind::kDouble, out, std::move(help)});
}

void FlagParser::AddBool(std::string name, bool* out, std::string help) {
  flags_.push_back({std::move(name), Kind::kBool, out, std::move(help)});
}

void FlagParser::AddByteSize(std::string name, int64_t* out, std::string help) {
  flags_.push_back({std::move(name), Kind::kByteSize, out, std::move(help)});
}

const FlagParser::Flag* FlagParser::Find(const std::string& name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

absl::Status FlagParser::Assign(const Flag& flag, const std::string& value) {
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.out) = value;
      return absl::OkStatus();
    case Kind::kStringList:
      static_cast<std::vector<std::string>*>(flag.out)->push_back(value);
      return absl::OkStatus();
    case Kind::kInt: {
      int64_t parsed = 0;
      if (!absl::SimpleAtoi(value, &parsed) || value.empty() || value[0] == '+' ||
          value.find_first_of(" \t") != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, ": expected an integer, got \"", value, "\""));
      }
      if (parsed < flag.min || parsed > flag.max) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag.name, ": ", parsed, " is out of range [", flag.min, ", ", flag.max, "]"));
      }
      *static_cast<int64_t*>(flag.out) = parsed;
      return absl::OkStatus();
    }
    case Kind::kDouble: {
      double parsed = 0;
      if (!absl::SimpleAtod(value, &parsed) || !(parsed >= 0) || parsed > 1e9) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, ": expected a non-negative number, got \"", value, "\""));
      }
      *static_cast<double*>(flag.out) = parsed;
      return absl::OkStatus();
    }
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(flag.out) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(flag.out) = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, ": expected true or false, got \"", value, "\""));
      }
      return absl::OkStatus();
    case Kind::kByteSize: {
      absl::StatusOr<int64_t> bytes = ParseByteSize(value);
      if (!bytes.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, ": ", bytes.status().message()));
      }
      *static_cast<int64_t*>(flag.out) = *bytes;
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unreachable");
}

absl::Status FlagParser::Parse(const std::vector<std::string>& args,
                               std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional->insert(positional->end(), args.begin() + i + 1, args.end());
      return absl::OkStatus();
    }
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional->push_back(arg);
      continue;
    }
    if (arg[1] != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg, " (flags are written --name)"));
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see '", command_, " --help')"));
    }
    if (!has_value && flag->kind == Kind::kBool) {
      value = "true";
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (absl::Status s = Assign(*flag, value); !s.ok()) return s;
    set_.insert(name);
  }
  return absl::OkStatus();
}

namespace {

// Where the group that starts at text[i] ends (one past it), or i + 1: square brackets, nested
// ("[--strategy a|b]"), and a short "(default …)" are not broken.
size_t GroupEnd(std::string_view text, size_t i) {
  if (text[i] == '(' && text.substr(i).starts_with("(default")) {
    const size_t close = text.find(')', i);
    if (close != std::string_view::npos && close - i < 48) return close + 1;
  }
  if (text[i] != '[') return i + 1;
  int depth = 0;
  for (size_t k = i; k < text.size(); ++k) {
    depth += text[k] == '[' ? 1 : (text[k] == ']' ? -1 : 0);
    if (depth == 0) return k + 1;
  }
  return text.size();
}

// `text` split at spaces outside the groups GroupEnd keeps whole.
std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t start = std::string_view::npos;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ') {
      if (start != std::string_view::npos) words.push_back(text.substr(start, i - start));
      start = std::string_view::npos;
      ++i;
      continue;
    }
    if (start == std::string_view::npos) start = i;
    i = GroupEnd(text, i);
  }
  if (start != std::string_view::npos) words.push_back(text.substr(start));
  return words;
}

// Appends `text` to `out`, which already holds `column` characters of the current line, broken
// between words so that lines stay within kHelpWidth where the words allow; continuation lines
// start with `indent` spaces. Ends with a newline.
void AppendWrapped(std::string_view text, size_t column, size_t indent, std::string* out) {
  bool first = true;
  for (std::string_view word : Words(text)) {
    if (!first && column + 1 + word.size() > kHelpWidth) {
      absl::StrAppend(out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (!first) {
      out->push_back(' ');
      ++column;
    }
    out->append(word.data(), word.size());
    column += word.size();
    first = false;
  }
  out->push_back('\n');
}

}  // namespace

std::string FlagParser::Metavariable(const Flag& flag) const {
  const std::string written = absl::StrCat("--", flag.name, " ");
  for (size_t at = usage_.find(written); at != std::string::npos;
       at = usage_.find(written, at + 1)) {
    if (at > 0 && usage_[at - 1] != ' ' && usage_[at - 1] != '[') continue;
    const size_t begin = at + written.size();
    const size_t end = std::min(usage_.find_first_of(" ]\n", begin), usage_.size());
    if (begin < end && usage_[begin] != '-' && usage_[begin] != '[') {
      return usage_.substr(begin, end - begin);
    }
  }
  return "VALUE";
}

std::string FlagParser::Help() const {
  std::string out;
  const std::string head = absl::StrCat("usage: ", command_, " ");
  const std::vector<absl::string_view> usage_lines = absl::StrSplit(usage_, '\n');
  for (size_t i = 0; i < usage_lines.size(); ++i) {
    // Further usage lines are other forms of the command, written "shardkit gather ...".
    const std::string lead = i == 0 ? head : std::string(7, ' ');
    out += lead;
    const absl::string_view line = absl::StripLeadingAsciiWhitespace(usage_lines[i]);
    AppendWrapped(std::string_view(line.data(), line.size()), lead.size(), head.size(), &out);
  }
  if (!flags_.empty()) absl::StrAppend(&out, "\nflags:\n");
  std::vector<std::pair<std::string, std::string>> rows;
  // The help texts start in one column, after the longest flag (22 to kMaxFlagColumn wide); a
  // longer flag has its help start on the next line, in that column.
  constexpr size_t kMaxFlagColumn = 28;
  size_t width = 22;
  for (const Flag& flag : flags_) {
    std::string left = absl::StrCat("--", flag.name);
    if (flag.kind != Kind::kBool) absl::StrAppend(&left, " ", Metavariable(flag));
    if (left.size() <= kMaxFlagColumn) width = std::max(width, left.size());
    rows.emplace_back(std::move(left), flag.help);
  }
  rows.emplace_back("-h, --help", "print this help and exit");
  const std::string column(width + 3, ' ');
  for (const auto& [left, help] : rows) {
    absl::StrAppend(&out, "  ", left);
    absl::StrAppend(
        &out, left.size() > width ? "\n" + column : std::string(width - left.size() + 1, ' '));
    AppendWrapped(help, column.size(), column.size(), &out);
  }
  if (!notes_.empty()) {
    absl::StrAppend(&out, "\n", notes_, absl::EndsWith(notes_, "\n") ? "" : "\n");
  }
  return out;
}

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
      return 2;
    default:
      return 1;
  }
}

int ReportError(const std::string& command, const absl::Status& status, std::ostream& err) {
  // One write per line: ranks of one job often share the stream (mpirun, srun), and pieces
  // written separately to an unbuffered std::cerr interleave with other ranks' lines.
  err << absl::StrCat(command, ": ", status.message(), "\n") << std::flush;
  return ExitCodeFor(status);
}

Positionals Positionals::None(std::string hint) { return Positionals(0, std::move(hint)); }

Positionals Positionals::ExactlyOne(const std::string& name) {
  return Positionals(1, absl::StrCat("expected exactly one ", name, kSeeHelp));
}

absl::Status Positionals::Check(const std::vector<std::string>& args) const {
  if (args.size() == count_) return absl::OkStatus();
  if (count_ == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args[0], "\"", error_));
  }
  return absl::InvalidArgumentError(error_);
}

ParseResult ParseCommand(FlagParser& flags, const std::vector<std::string>& args,
                         const Positionals& positionals, std::ostream& out, std::ostream& err) {
  std::vector<std::string> positional;
  absl::Status status = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    out << flags.Help();
    return ParseResult(ParseResult::Outcome::kHelp, absl::OkStatus(), {});
  }
  if (status.ok()) status = positionals.Check(positional);
  if (!status.ok()) {
    ReportError(flags.command(), status, err);
    return ParseResult(ParseResult::Outcome::kError, std::move(status), {});
  }
  return ParseResult(ParseResult::Outcome::kParsed, absl::OkStatus(), std::move(positional));
}

absl::Status Require(const FlagParser& flags, std::initializer_list<std::string> names,
                     const std::string& suffix) {
  bool missing = false;
  std::string list;
  size_t i = 0;
  for (const std::string& name : names) {
    missing = missing || !flags.WasSet(name);
    const char* separator = i == 0 ? "" : (i + 1 == names.size() ? " and " : ", ");
    absl::StrAppend(&list, separator, "--", name);
    ++i;
  }
  if (!missing) return absl::OkStatus();
  const char* verb = names.size() == 1 ? " is required" : " are required";
  return absl::InvalidArgumentError(absl::StrCat(list, verb, suffix));
}

}  // namespace shardkit::flags
