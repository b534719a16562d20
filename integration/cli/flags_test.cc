#include "integration/cli/flags.h"

#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace shardkit::cli {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

// The help texts start in one column, after the longest flag (at least 22 wide).
TEST(FlagHelpTest, LongFlagsWidenTheColumn) {
  int64_t nproc = 1;
  FlagParser alone("shardkit test", "[flags] ARGS");
  alone.AddInt("nproc", &nproc, "ranks", 1, 1024);
  EXPECT_THAT(alone.Help(), HasSubstr("\n  --nproc VALUE          ranks\n"));
  int64_t block = 128;
  bool allow = false;
  FlagParser parser("shardkit test", "");
  parser.AddInt("nproc", &nproc, "ranks");
  AddFp8Flags(parser, &block, &allow);
  const std::string help = parser.Help();
  EXPECT_THAT(help, HasSubstr("\n  --nproc VALUE             ranks\n"));
  EXPECT_THAT(help, HasSubstr("\n  --allow-misaligned-scales warn instead"));
  EXPECT_THAT(help, HasSubstr("\n  -h, --help                print this help"));
  EXPECT_THAT(help, HasSubstr("(default 128)"));
}

// A flag's metavariable is the word after it in the usage; VALUE when the usage does not show it.
TEST(FlagHelpTest, MetavariablesComeFromTheUsage) {
  std::string out, strategy, other;
  int64_t nproc = 0, world = 0, memory = kDefaultMemoryMib;
  bool verbose = false;
  FlagParser parser("shardkit test",
                    "--out DIR [--nproc N] [--strategy a|b] [--verbose] [--world-size W] "
                    "[--memory-mib M]");
  parser.AddString("out", &out, "where");
  parser.AddInt("nproc", &nproc, "ranks");
  parser.AddString("strategy", &strategy, "how");
  parser.AddBool("verbose", &verbose, "chatty");
  parser.AddInt("world", &world, "not --world-size");
  parser.AddString("other", &other, "not in the usage");
  AddMemoryFlag(parser, &memory);
  const std::string help = parser.Help();
  EXPECT_THAT(help, HasSubstr("\n  --out DIR              where\n"));
  EXPECT_THAT(help, HasSubstr("\n  --nproc N              ranks\n"));
  EXPECT_THAT(help, HasSubstr("\n  --strategy a|b         how\n"));
  EXPECT_THAT(help, HasSubstr("\n  --verbose              chatty\n"));
  EXPECT_THAT(help, HasSubstr("\n  --world VALUE          not --world-size\n"));
  EXPECT_THAT(help, HasSubstr("\n  --other VALUE          not in the usage\n"));
  EXPECT_THAT(help, HasSubstr("\n  --memory-mib M         at most M MiB"));
  EXPECT_THAT(help, HasSubstr("(default 512)"));
}

TEST(FlagHelpTest, Fp8Flags) {
  int64_t block = 128;
  bool allow = false;
  FlagParser parser("shardkit test", "");
  AddFp8Flags(parser, &block, &allow);
  std::vector<std::string> positional;
  ASSERT_THAT(parser.Parse({"--fp8-block", "64", "--allow-misaligned-scales"}, &positional),
              IsOk());
  EXPECT_EQ(block, 64);
  EXPECT_TRUE(allow);
  EXPECT_THAT(parser.Parse({"--fp8-block", "0"}, &positional),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--fp8-block: 0 is out of range [1, 1073741824]")));
}

// --nproc, --backend and --timeout as every command that runs ranks declares them: the help
// says each command's default, the values and which were given are recorded, the checks are
// the same for all.
TEST(RankFlagsTest, DefaultNprocAndTheCommandsWords) {
  RankFlags ranks({.nproc_help = "local ranks", .nproc_default = 4, .nproc_max = 64});
  FlagParser parser("shardkit test", "[--nproc N] [--backend B] [--timeout S]");
  AddRankFlags(parser, &ranks);
  const std::string help = parser.Help();
  EXPECT_THAT(help, HasSubstr("\n  --nproc N              local ranks (default 4)\n"));
  EXPECT_THAT(help, HasSubstr("\n  --backend B            communication backend (default: "
                              "$SHARDKIT_BACKEND, else gloo)\n"));
  EXPECT_THAT(help, HasSubstr("\n  --timeout S            per-operation deadline in seconds "
                              "(default: $SHARDKIT_TIMEOUT, else 60)\n"));
  std::vector<std::string> positional;
  ASSERT_THAT(parser.Parse({"--timeout", "2.5"}, &positional), IsOk());
  ASSERT_THAT(CheckRankFlags(parser, &ranks), IsOk());
  EXPECT_EQ(ranks.nproc, 4);
  EXPECT_FALSE(ranks.nproc_set);
  EXPECT_FALSE(ranks.backend_set);
  EXPECT_TRUE(ranks.timeout_set);
  EXPECT_EQ(ranks.timeout_s, 2.5);
  EXPECT_THAT(parser.Parse({"--nproc", "65"}, &positional),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--nproc: 65 is out of range [1, 64]")));
  ASSERT_THAT(parser.Parse({"--nproc", "3", "--backend", "mpi"}, &positional), IsOk());
  ASSERT_THAT(CheckRankFlags(parser, &ranks), IsOk());
  EXPECT_TRUE(ranks.nproc_set);
  EXPECT_EQ(ranks.nproc, 3);
  EXPECT_TRUE(ranks.backend_set);
  EXPECT_EQ(ranks.backend, "mpi");
}

TEST(RankFlagsTest, RequiredNprocAndAPositiveTimeout) {
  RankFlags ranks({.nproc_help = "local ranks", .nproc_required = true});
  FlagParser parser("shardkit test", "--nproc N [--timeout S]");
  AddRankFlags(parser, &ranks);
  EXPECT_THAT(parser.Help(), HasSubstr("--nproc N              local ranks (required)\n"));
  std::vector<std::string> positional;
  ASSERT_THAT(parser.Parse({"--timeout", "0"}, &positional), IsOk());
  EXPECT_THAT(CheckRankFlags(parser, &ranks),
              StatusIs(absl::StatusCode::kInvalidArgument, "--nproc is required"));
  ASSERT_THAT(parser.Parse({"--nproc", "65536"}, &positional), IsOk());
  EXPECT_THAT(CheckRankFlags(parser, &ranks),
              StatusIs(absl::StatusCode::kInvalidArgument, "--timeout must be > 0 seconds, got 0"));
}

// A command whose help lists its own flags between them declares them in several calls; the
// help keeps that order.
TEST(RankFlagsTest, DeclaredInParts) {
  RankFlags ranks({.nproc_help = "ranks", .timeout_help = "deadline of the whole run"});
  std::string store;
  FlagParser parser("shardkit test", "");
  AddRankFlags(parser, &ranks, {RankFlag::kNproc});
  parser.AddString("store", &store, "where");
  AddRankFlags(parser, &ranks, {RankFlag::kTimeout, RankFlag::kBackend});
  const std::string help = parser.Help();
  const size_t nproc = help.find("--nproc"), store_at = help.find("--store");
  const size_t timeout = help.find("--timeout"), backend = help.find("--backend");
  ASSERT_NE(backend, std::string::npos);
  EXPECT_LT(nproc, store_at);
  EXPECT_LT(store_at, timeout);
  EXPECT_LT(timeout, backend);
  EXPECT_THAT(help, HasSubstr("deadline of the whole run (default: $SHARDKIT_TIMEOUT"));
}

}  // namespace
}  // namespace shardkit::cli
