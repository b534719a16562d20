#include "core/os/opened_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::os {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(OpenedFileTest, ReadsByRangeAndSeesNoChange) {
  const std::string path = testing::FreshTestDir("opened") + "/f";
  Write(path, "0123456789");
  absl::StatusOr<OpenedFile> file = OpenedFile::Open(path);
  ASSERT_THAT(file.status(), IsOk());
  EXPECT_EQ(file->size(), 10u);
  std::string out(4, '\0');
  ASSERT_THAT(file->Pread(3, 4, out.data()), IsOk());
  EXPECT_EQ(out, "3456");
  EXPECT_THAT(file->CheckUnchanged(), IsOk());
  EXPECT_THAT(file->Pread(8, 4, out.data()), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      HasSubstr(path + ": file is truncated")));
}

TEST(OpenedFileTest, RefusesWhatIsNotARegularFile) {
  const std::string dir = testing::FreshTestDir("opened");
  EXPECT_THAT(OpenedFile::Open(dir + "/missing").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing: no such file")));
  EXPECT_THAT(OpenedFile::Open(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

TEST(OpenedFileTest, SeesAResizedReplacedOrRemovedFile) {
  const std::string dir = testing::FreshTestDir("opened");
  const std::string path = dir + "/f";
  Write(path, "abc");
  absl::StatusOr<OpenedFile> file = OpenedFile::Open(path);
  ASSERT_THAT(file.status(), IsOk());
  std::ofstream(path, std::ios::binary | std::ios::app) << "d";
  EXPECT_THAT(file->CheckUnchanged(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("changed while open: it had 3 bytes, now 4")));

  Write(dir + "/g", "xyz");
  absl::StatusOr<OpenedFile> g = OpenedFile::Open(dir + "/g");
  ASSERT_THAT(g.status(), IsOk());
  Write(dir + "/h", "XYZ");
  std::filesystem::rename(dir + "/h", dir + "/g");
  EXPECT_THAT(g->CheckUnchanged(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("was replaced while open")));

  std::filesystem::remove(dir + "/g");
  EXPECT_THAT(g->CheckUnchanged(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("was removed while open")));
}

}  // namespace
}  // namespace shardkit::os
