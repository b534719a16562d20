#include "testing/test_dir.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace shardkit::testing {
namespace {

std::string Root() {
  const char* root = std::getenv("TEST_TMPDIR");
  return root != nullptr ? std::string(root) : std::filesystem::temp_directory_path().string();
}

}  // namespace

std::string FreshTestDir(std::string_view stem) {
  static std::atomic<int> counter{0};
  std::string dir = absl::StrCat(Root(), "/", absl::string_view(stem.data(), stem.size()), "-",
                                 getpid(), "-", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string TestPath(std::string_view name) {
  return absl::StrCat(Root(), "/", absl::string_view(name.data(), name.size()));
}

}  // namespace shardkit::testing
