// ExchangeDirectories and RemoveTree on real directories.
#include "core/os/swap_dir.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::os {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SwapDirTest, ExchangesTwoDirectoriesWithTheirContents) {
  const std::string root = testing::FreshTestDir("swap");
  const std::string a = root + "/a", b = root + "/.a.new";
  fs::create_directories(a + "/sub");
  fs::create_directory(b);
  Write(a + "/index.json", "old");
  Write(a + "/sub/x", "deep");
  Write(b + "/index.json", "new");
  ASSERT_THAT(ExchangeDirectories(b, a), IsOk());
  EXPECT_EQ(Read(a + "/index.json"), "new");
  EXPECT_FALSE(fs::exists(a + "/sub"));
  EXPECT_EQ(Read(b + "/index.json"), "old");
  EXPECT_EQ(Read(b + "/sub/x"), "deep");
  EXPECT_TRUE(RemoveTree(b));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_EQ(Read(a + "/index.json"), "new");
  EXPECT_TRUE(RemoveTree(b));  // nothing there: nothing to fail
}

TEST(SwapDirTest, AMissingSideChangesNothing) {
  const std::string root = testing::FreshTestDir("swap_missing");
  fs::create_directory(root + "/a");
  Write(root + "/a/f", "kept");
  EXPECT_THAT(ExchangeDirectories(root + "/absent", root + "/a"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot swap " + root + "/absent and " + root + "/a")));
  EXPECT_EQ(Read(root + "/a/f"), "kept");
  EXPECT_FALSE(fs::exists(root + "/absent"));
}

volatile sig_atomic_t hangups = 0;

TEST(SwapDirTest, InterruptsWaitForTheBlockToEnd) {
  struct sigaction count = {};
  struct sigaction before = {};
  count.sa_handler = [](int) { hangups = hangups + 1; };
  ASSERT_EQ(::sigaction(SIGHUP, &count, &before), 0);
  {
    ScopedInterruptBlock block;
    ::raise(SIGHUP);
    EXPECT_EQ(hangups, 0);
  }
  EXPECT_EQ(hangups, 1);  // delivered as the block ended
  ::sigaction(SIGHUP, &before, nullptr);
}

}  // namespace
}  // namespace shardkit::os
