// Golden files in specs/testdata/: NAME.json -> NAME.canonical (canonical JSON) ->
// NAME.fingerprint, and invalid/NAME.json -> invalid/NAME.error (a substring of the
// kInvalidArgument message). Checks the round trip, the fixed point canon(parse(canon(x))) ==
// canon(x) and pinned fingerprints.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "specs/fingerprint.h"
#include "specs/plan.h"
#include "specs/spec_json.h"
#include "testing/status_matchers.h"

namespace shardkit::specs {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

fs::path TestdataDir() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return fs::path(srcdir == nullptr ? "." : srcdir) / "shardkit" / "specs" / "testdata";
}

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::vector<fs::path> JsonFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Canonical bytes of a spec or plan file's contents.
absl::StatusOr<std::string> Canonicalize(std::string_view text) {
  absl::StatusOr<SpecOrPlan> parsed = ParseSpecOrPlan(text);
  if (!parsed.ok()) return parsed.status();
  if (const Plan* plan = std::get_if<Plan>(&*parsed)) return CanonicalJson(*plan);
  return CanonicalJson(std::get<ShardingSpec>(*parsed));
}

TEST(GoldenTest, CanonicalFormsAndFingerprints) {
  const std::vector<fs::path> files = JsonFiles(TestdataDir());
  ASSERT_GE(files.size(), 7u);
  for (const fs::path& input : files) {
    SCOPED_TRACE(input.filename().string());
    fs::path base = input;
    const std::string expected = FirstLine(Read(base.replace_extension(".canonical")));
    const std::string fingerprint = FirstLine(Read(base.replace_extension(".fingerprint")));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::string canonical, Canonicalize(Read(input)));
    EXPECT_EQ(canonical, expected);
    EXPECT_EQ(Fingerprint(canonical), fingerprint);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(std::string again, Canonicalize(canonical));
    EXPECT_EQ(again, canonical);  // fixed point
  }
}

// The canonical writer (no DOM) gives exactly the bytes the JSON library's compact, key-sorted dump
// gives, for every golden spec and its form bound to a shape and a world.
TEST(GoldenTest, CanonicalTextIsTheLibrarysDump) {
  int bound_checked = 0;
  for (const fs::path& input : JsonFiles(TestdataDir())) {
    SCOPED_TRACE(input.filename().string());
    absl::StatusOr<SpecOrPlan> parsed = ParseSpecOrPlan(Read(input));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const ShardingSpec* spec = std::get_if<ShardingSpec>(&*parsed);
    if (spec == nullptr) continue;
    const std::string canonical = CanonicalJson(*spec);
    EXPECT_EQ(nlohmann::json::parse(canonical).dump(), canonical);
    absl::StatusOr<std::string> bound = BoundCanonicalJson(*spec, Shape{96, 64}, 8);
    if (!bound.ok()) continue;
    EXPECT_EQ(nlohmann::json::parse(*bound).dump(), *bound);
    ++bound_checked;
  }
  EXPECT_GE(bound_checked, 4);
}

TEST(GoldenTest, InvalidFilesFailWithTheirMessage) {
  const std::vector<fs::path> files = JsonFiles(TestdataDir() / "invalid");
  ASSERT_GE(files.size(), 7u);
  for (const fs::path& input : files) {
    SCOPED_TRACE(input.filename().string());
    fs::path base = input;
    const std::string message = FirstLine(Read(base.replace_extension(".error")));
    EXPECT_THAT(Canonicalize(Read(input)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  }
}

}  // namespace
}  // namespace shardkit::specs
