#include "integration/flags/flags.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "testing/status_matchers.h"

namespace shardkit::flags {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using Outcome = ParseResult::Outcome;

struct Parsed {
  std::string plan = "default";
  int64_t nproc = 1;
  double timeout = 60;
  bool verbose = false;
};

FlagParser TestParser(Parsed* v) {
  FlagParser parser("shardkit test", "[flags] ARGS");
  parser.AddString("plan", &v->plan, "a plan");
  parser.AddInt("nproc", &v->nproc, "ranks", 1, 1024);
  parser.AddDouble("timeout", &v->timeout, "seconds");
  parser.AddBool("verbose", &v->verbose, "chatty");
  return parser;
}

class FlagParserTest : public ::testing::Test {
 protected:
  FlagParserTest() : parser_(TestParser(&v_)) {}
  absl::Status Parse(std::vector<std::string> args) { return parser_.Parse(args, &positional_); }

  Parsed v_;
  FlagParser parser_;
  std::vector<std::string> positional_;
};

TEST_F(FlagParserTest, ParsesBothFormsAndPositionals) {
  ASSERT_THAT(Parse({"a", "--plan", "p.json", "--nproc=4", "b", "--verbose", "--timeout", "2.5"}),
              IsOk());
  EXPECT_EQ(v_.plan, "p.json");
  EXPECT_EQ(v_.nproc, 4);
  EXPECT_EQ(v_.timeout, 2.5);
  EXPECT_TRUE(v_.verbose);
  EXPECT_THAT(positional_, ElementsAre("a", "b"));
  EXPECT_TRUE(parser_.WasSet("plan"));
  EXPECT_FALSE(parser_.help_requested());
}

TEST_F(FlagParserTest, DoubleDashEndsFlags) {
  ASSERT_THAT(Parse({"--nproc", "3", "--", "sh", "-c", "--plan"}), IsOk());
  EXPECT_EQ(v_.nproc, 3);
  EXPECT_EQ(v_.plan, "default");
  EXPECT_FALSE(parser_.WasSet("plan"));
  EXPECT_THAT(positional_, ElementsAre("sh", "-c", "--plan"));
}

TEST_F(FlagParserTest, Errors) {
  EXPECT_THAT(Parse({"--bogus"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag --bogus")));
  EXPECT_THAT(Parse({"-x"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-x")));
  EXPECT_THAT(Parse({"--plan"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--plan needs a value")));
  EXPECT_THAT(Parse({"--nproc", "x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected an integer")));
  EXPECT_THAT(Parse({"--nproc", "0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range [1, 1024]")));
  EXPECT_THAT(Parse({"--timeout=-1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-negative")));
  EXPECT_THAT(Parse({"--verbose=maybe"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("true or false")));
}

TEST(FlagParserListTest, RepeatedFlagsAppendInOrder) {
  FlagParser parser("shardkit test", "[--include GLOB]...");
  std::vector<std::string> include;
  parser.AddStringList("include", &include, "patterns");
  std::vector<std::string> positional;
  ASSERT_THAT(parser.Parse({"--include", "model.**", "x", "--include=*.bias", "--include", ""},
                           &positional),
              IsOk());
  EXPECT_THAT(include, ElementsAre("model.**", "*.bias", ""));
  EXPECT_THAT(positional, ElementsAre("x"));
  EXPECT_TRUE(parser.WasSet("include"));
}

TEST_F(FlagParserTest, HelpListsFlags) {
  ASSERT_THAT(Parse({"--help"}), IsOk());
  EXPECT_TRUE(parser_.help_requested());
  EXPECT_THAT(parser_.Help(), HasSubstr("usage: shardkit test [flags] ARGS"));
  EXPECT_THAT(parser_.Help(), HasSubstr("--nproc VALUE"));
}

// Lines are broken between words to stay within kHelpWidth: the usage under its first word, a
// flag's help in the help column; brackets and a "(default …)" are never broken.
TEST(FlagHelpTest, LongLinesAreWrapped) {
  std::string value;
  std::string usage;
  for (int i = 0; i < 12; ++i) absl::StrAppend(&usage, "[--flag-number-", i, " X] ");
  FlagParser parser("shardkit test", usage);
  std::string help_text;
  for (int i = 0; i < 30; ++i) absl::StrAppend(&help_text, "word", i, " ");
  parser.AddString("long", &value, help_text + "(default: the longest default here)");
  const std::string help = parser.Help();
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    EXPECT_LE(line.size(), kHelpWidth) << line;
  }
  EXPECT_THAT(help, HasSubstr("\n                     [--flag-number-"));  // under "shardkit test"
  EXPECT_THAT(help, HasSubstr("\n                         word"));         // the help column
  EXPECT_THAT(help, HasSubstr("(default: the longest default here)"));
  EXPECT_THAT(help, Not(HasSubstr("[--flag-number-1\n")));
}

TEST(FlagHelpTest, FlagsTooLongForTheColumnHaveTheirHelpBelow) {
  std::string strategy;
  FlagParser parser("shardkit test", "[--strategy scatter|broadcast|direct]");
  parser.AddString("strategy", &strategy, "how");
  EXPECT_THAT(parser.Help(), HasSubstr("\n  --strategy scatter|broadcast|direct\n"
                                       "                         how\n"));
}

TEST(FlagHelpTest, NotesFollowTheFlags) {
  FlagParser parser("shardkit test", "");
  parser.SetHelpNotes("an example:\n  {}\n");
  EXPECT_THAT(parser.Help(), HasSubstr("print this help and exit\n\nan example:\n  {}\n"));
}

TEST(ForFlagTest, ErrorsNameTheFlag) {
  EXPECT_THAT(ForFlag("strategy", absl::StatusOr<int>(absl::InvalidArgumentError("expected a"))),
              StatusIs(absl::StatusCode::kInvalidArgument, "--strategy: expected a"));
  EXPECT_THAT(ForFlag("dtype", absl::StatusOr<int>(7)), IsOkAndHolds(7));
}

// ParseCommand over a fresh TestParser per call, stdout and stderr captured across calls.
class ParseCommandTest : public ::testing::Test {
 protected:
  ParseResult Run(std::vector<std::string> args, const Positionals& positionals) {
    FlagParser parser = TestParser(&v_);
    return ParseCommand(parser, args, positionals, out_, err_);
  }

  Parsed v_;
  std::ostringstream out_, err_;
};

TEST_F(ParseCommandTest, ParsedAssignsFlagsAndPrintsNothing) {
  const ParseResult r = Run({"--nproc", "4", "p"}, Positionals::ExactlyOne("PATH"));
  EXPECT_EQ(r.outcome(), Outcome::kParsed);
  EXPECT_FALSE(r.done());
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_THAT(r.status(), IsOk());
  EXPECT_THAT(r.positional(), ElementsAre("p"));
  EXPECT_EQ(v_.nproc, 4);
  EXPECT_THAT(out_.str(), IsEmpty());
  EXPECT_THAT(err_.str(), IsEmpty());
}

TEST_F(ParseCommandTest, HelpGoesToStdoutAndExitsZero) {
  const ParseResult r = Run({"--help"}, Positionals::None());
  EXPECT_EQ(r.outcome(), Outcome::kHelp);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(out_.str(), TestParser(&v_).Help());
  EXPECT_THAT(err_.str(), IsEmpty());
}

TEST_F(ParseCommandTest, HelpBeatsLaterErrorsAndPositionals) {
  EXPECT_EQ(Run({"-h", "--bogus"}, Positionals::None()).outcome(), Outcome::kHelp);
  EXPECT_EQ(Run({"--help", "--nproc"}, Positionals::None()).outcome(), Outcome::kHelp);
  EXPECT_EQ(Run({"stray", "--help"}, Positionals::None()).outcome(), Outcome::kHelp);
  EXPECT_EQ(Run({"--help"}, Positionals::ExactlyOne("PATH")).outcome(), Outcome::kHelp);
  EXPECT_THAT(err_.str(), IsEmpty());
  const std::string help = TestParser(&v_).Help();
  EXPECT_EQ(out_.str(), help + help + help + help);
}

TEST_F(ParseCommandTest, BadFlagBeforeHelpIsTheError) {
  const ParseResult r = Run({"--bogus", "--help"}, Positionals::None());
  EXPECT_EQ(r.outcome(), Outcome::kError);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   "unknown flag --bogus (see 'shardkit test --help')"));
  EXPECT_EQ(err_.str(), "shardkit test: unknown flag --bogus (see 'shardkit test --help')\n");
  EXPECT_THAT(out_.str(), IsEmpty());
}

TEST_F(ParseCommandTest, BadValueIsTheError) {
  const ParseResult r = Run({"--nproc", "0"}, Positionals::None());
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_EQ(err_.str(), "shardkit test: --nproc: 0 is out of range [1, 1024]\n");
}

TEST_F(ParseCommandTest, NoPositionals) {
  const ParseResult r = Run({"--verbose", "stray", "more"}, Positionals::None());
  EXPECT_EQ(r.outcome(), Outcome::kError);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_THAT(r.positional(), IsEmpty());
  EXPECT_EQ(err_.str(), "shardkit test: unexpected argument \"stray\"\n");
}

TEST_F(ParseCommandTest, NoPositionalsWithHint) {
  const ParseResult r = Run({"--", "cmd"}, Positionals::None(" (put the command after '--')"));
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_EQ(err_.str(),
            "shardkit test: unexpected argument \"cmd\" (put the command after '--')\n");
}

TEST_F(ParseCommandTest, ExactlyOnePositional) {
  EXPECT_EQ(Run({}, Positionals::ExactlyOne("PATH")).exit_code(), 2);
  EXPECT_EQ(Run({"a", "b"}, Positionals::ExactlyOne("PATH")).exit_code(), 2);
  EXPECT_EQ(err_.str(),
            "shardkit test: expected exactly one PATH (see --help)\n"
            "shardkit test: expected exactly one PATH (see --help)\n");
}

TEST_F(FlagParserTest, RequireOneFlag) {
  ASSERT_THAT(Parse({"--plan", "p.json"}), IsOk());
  EXPECT_THAT(Require(parser_, {"plan"}), IsOk());
  EXPECT_THAT(Require(parser_, {"nproc"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--nproc is required"));
  EXPECT_THAT(Require(parser_, {"nproc"}, kSeeHelp),
              StatusIs(absl::StatusCode::kInvalidArgument, "--nproc is required (see --help)"));
}

TEST_F(FlagParserTest, RequireSeveralNamesAllWhenAnyIsMissing) {
  ASSERT_THAT(Parse({"--plan", "p.json", "--verbose"}), IsOk());
  EXPECT_THAT(Require(parser_, {"plan", "verbose"}), IsOk());
  EXPECT_THAT(
      Require(parser_, {"plan", "nproc"}, kSeeHelp),
      StatusIs(absl::StatusCode::kInvalidArgument, "--plan and --nproc are required (see --help)"));
  EXPECT_THAT(
      Require(parser_, {"timeout", "plan", "nproc"}),
      StatusIs(absl::StatusCode::kInvalidArgument, "--timeout, --plan and --nproc are required"));
}

TEST(ReportErrorTest, WritesOneLineAndReturnsTheExitCode) {
  std::ostringstream err;
  EXPECT_EQ(ReportError("shardkit x", absl::NotFoundError("no such file"), err), 2);
  EXPECT_EQ(ReportError("shardkit x", absl::UnavailableError("peer died"), err), 1);
  EXPECT_EQ(err.str(), "shardkit x: no such file\nshardkit x: peer died\n");
}

TEST(ExitCodeTest, InvalidRequestsExitTwo) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("x")), 1);
}

TEST(ParseByteSizeTest, PlainBytesAndUnitsInAnyCase) {
  EXPECT_THAT(ParseByteSize("1"), IsOkAndHolds(1));
  EXPECT_THAT(ParseByteSize("1000000"), IsOkAndHolds(1000000));
  EXPECT_THAT(ParseByteSize("007"), IsOkAndHolds(7));
  EXPECT_THAT(ParseByteSize("500MB"), IsOkAndHolds(500'000'000));
  EXPECT_THAT(ParseByteSize("500mb"), IsOkAndHolds(500'000'000));
  EXPECT_THAT(ParseByteSize("3kB"), IsOkAndHolds(3000));
  EXPECT_THAT(ParseByteSize("5GB"), IsOkAndHolds(5'000'000'000));
  EXPECT_THAT(ParseByteSize("3KiB"), IsOkAndHolds(3 << 10));
  EXPECT_THAT(ParseByteSize("2mib"), IsOkAndHolds(2 << 20));
  EXPECT_THAT(ParseByteSize("2GIB"), IsOkAndHolds(int64_t{2} << 30));
  EXPECT_THAT(ParseByteSize("9223372036854775807"), IsOkAndHolds(INT64_MAX));
  EXPECT_THAT(ParseByteSize("8589934591GiB"), IsOkAndHolds(int64_t{8589934591} << 30));
}

TEST(ParseByteSizeTest, RefusesWhatIsNotAPositiveWholeSize) {
  const auto refused = [](const char* why) {
    return StatusIs(absl::StatusCode::kInvalidArgument,
                    AllOf(HasSubstr(why), HasSubstr("expected a positive whole number of bytes")));
  };
  EXPECT_THAT(ParseByteSize("0"), refused("got \"0\": zero is not a size"));
  EXPECT_THAT(ParseByteSize("0MB"), refused("zero is not a size"));
  EXPECT_THAT(ParseByteSize("-5"), refused("got \"-5\": no sign is accepted"));
  EXPECT_THAT(ParseByteSize("-5MB"), refused("no sign"));
  EXPECT_THAT(ParseByteSize("+5"), refused("no sign"));
  EXPECT_THAT(ParseByteSize("1.5GB"), refused("got \"1.5GB\": fractions are not accepted"));
  EXPECT_THAT(ParseByteSize("2,5MB"), refused("fractions"));
  EXPECT_THAT(ParseByteSize("0.5"), refused("fractions"));
  EXPECT_THAT(ParseByteSize(""), refused("got \"\": no digits"));
  EXPECT_THAT(ParseByteSize("MB"), refused("no digits"));
  EXPECT_THAT(ParseByteSize("abc"), refused("no digits"));
  for (const char* spaced : {"5 MB", " 5", "5MB ", "5\t"}) {
    EXPECT_THAT(ParseByteSize(spaced), refused("no spaces are accepted")) << spaced;
  }
  for (const char* junk : {"5TB", "5B", "5M", "5mbit", "0x10", "5e9", "5MB5"}) {
    EXPECT_THAT(ParseByteSize(junk), refused("unknown unit")) << junk;
  }
  EXPECT_THAT(ParseByteSize("9223372036854775808"), refused("more than 2^63 - 1 bytes"));
  EXPECT_THAT(ParseByteSize("8589934592GiB"), refused("more than 2^63 - 1 bytes"));
  EXPECT_THAT(ParseByteSize("99999999999999999999999KB"), refused("more than 2^63 - 1 bytes"));
}

TEST(AddByteSizeTest, ErrorsNameTheFlag) {
  int64_t bytes = 0;
  FlagParser parser("shardkit test", "");
  parser.AddByteSize("max-shard-size", &bytes, "limit");
  std::vector<std::string> positional;
  ASSERT_THAT(parser.Parse({"--max-shard-size=2KiB"}, &positional), IsOk());
  EXPECT_EQ(bytes, 2048);
  EXPECT_THAT(parser.Parse({"--max-shard-size", "0"}, &positional),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--max-shard-size: got \"0\": zero is not a size")));
  EXPECT_EQ(bytes, 2048);
}

}  // namespace
}  // namespace shardkit::flags
