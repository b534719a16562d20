// TempDir: a fresh directory per object, removed with its contents on destruction.
#include "core/os/temp_dir.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace shardkit::os {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

TEST(TempDirTest, CreatesAFreshDirectoryAndRemovesItWithItsContents) {
  std::string path;
  {
    TempDir a, b;
    EXPECT_TRUE(a.path().empty());
    ASSERT_THAT(a.Create("temp-dir-test"), IsOk());
    ASSERT_THAT(b.Create("temp-dir-test"), IsOk());
    EXPECT_NE(a.path(), b.path());
    EXPECT_TRUE(fs::is_directory(a.path()));
    path = a.path();
    fs::create_directory(path + "/sub");
    std::ofstream(path + "/sub/file") << "x";
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(TempDirTest, NamesThePatternWhenItCannotCreate) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TMPDIR", "/nonexistent-shardkit-dir", 1);
  TempDir dir;
  EXPECT_THAT(dir.Create("x"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("/nonexistent-shardkit-dir/x-")));
  if (old != nullptr) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace shardkit::os
