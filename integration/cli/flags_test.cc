#include "integration/cli/flags.h"

#include "testing/status_matchers.h"

namespace shardkit::cli {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Parsed {
  std::string plan = "default";
  int64_t nproc = 1;
  double timeout = 60;
  bool verbose = false;
};

class FlagParserTest : public ::testing::Test {
 protected:
  FlagParserTest() : parser_("shardkit test", "[flags] ARGS") {
    parser_.AddString("plan", &v_.plan, "a plan");
    parser_.AddInt("nproc", &v_.nproc, "ranks", 1, 1024);
    parser_.AddDouble("timeout", &v_.timeout, "seconds");
    parser_.AddBool("verbose", &v_.verbose, "chatty");
  }
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

TEST_F(FlagParserTest, HelpListsFlags) {
  ASSERT_THAT(Parse({"--help"}), IsOk());
  EXPECT_TRUE(parser_.help_requested());
  EXPECT_THAT(parser_.Help(), HasSubstr("usage: shardkit test [flags] ARGS"));
  EXPECT_THAT(parser_.Help(), HasSubstr("--nproc VALUE"));
}

TEST(ExitCodeTest, InvalidRequestsExitTwo) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("x")), 1);
}

}  // namespace
}  // namespace shardkit::cli
