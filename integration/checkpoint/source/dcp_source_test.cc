#include "integration/checkpoint/source/dcp_source.h"

#include <filesystem>
#include <string>
#include <vector>

#include "core/os/files.h"
#include "integration/formats/dcp/test_util.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::shardkit::dcp::testing::FixturePath;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kStaging = 64;  // small: short pieces go through staging, long ones around it

std::string Expected(const std::string& fixture, const std::string& name) {
  absl::StatusOr<std::string> bytes =
      os::ReadWholeFile(FixturePath(fixture + ".expected/" + name + ".bin"));
  EXPECT_THAT(bytes.status(), IsOk());
  return bytes.ok() ? *bytes : "";
}

std::string Read(const DcpSource& source, size_t t, int64_t offset, int64_t size) {
  std::string out(static_cast<size_t>(size), '\xAA');
  EXPECT_THAT(source.ReadBytes(t, offset, size, reinterpret_cast<std::byte*>(out.data())), IsOk());
  return out;
}

// A copy of fixture `name` that a test may change.
std::string CopyOf(const std::string& name) {
  const std::string dir = testing::FreshTestDir("dcp") + "/" + name;
  fs::copy(FixturePath(name), dir, fs::copy_options::recursive);
  return dir;
}

class DcpSourceFixtures : public ::testing::TestWithParam<std::string> {};

// Every tensor's bytes as torch saved them, read whole and in pieces of every length up to 7 at
// every offset: across chunk boundaries (sharded: rows, columns, a 2-D grid) and, for `t` of
// basic, a chunk saved with transposed strides.
TEST_P(DcpSourceFixtures, ReadsEveryRangeOfEveryTensorAsTorchSavedIt) {
  absl::StatusOr<std::unique_ptr<DcpSource>> source =
      DcpSource::Open(FixturePath(GetParam()), kStaging);
  ASSERT_THAT(source.status(), IsOk());
  const safetensors::Header& header = (*source)->header();
  ASSERT_FALSE(header.tensors.empty());
  for (size_t t = 0; t < header.tensors.size(); ++t) {
    const safetensors::TensorInfo& info = header.tensors[t];
    const std::string want = Expected(GetParam(), info.name);
    const auto bytes = static_cast<int64_t>(info.end - info.begin);
    ASSERT_EQ(bytes, static_cast<int64_t>(want.size())) << info.name;
    EXPECT_EQ(Read(**source, t, 0, bytes), want) << info.name;
    for (int64_t n = 1; n <= 7; ++n) {
      for (int64_t at = 0; at + n <= bytes; ++at) {
        ASSERT_EQ(Read(**source, t, at, n), want.substr(at, n)) << info.name << " @" << at;
      }
    }
    EXPECT_THAT((*source)->CheckUnchanged(t), IsOk());
  }
  EXPECT_GT((*source)->bytes_read(), 0);
  EXPECT_EQ((*source)->files_read(), static_cast<int64_t>((*source)->identity().size()) - 1);
}

INSTANTIATE_TEST_SUITE_P(Torch215, DcpSourceFixtures,
                         ::testing::Values("basic", "sharded", "local"));

TEST(DcpSourceTest, NamesItsFilesAndTheItemsItSkips) {
  absl::StatusOr<std::unique_ptr<DcpSource>> basic =
      DcpSource::Open(FixturePath("basic"), kStaging);
  ASSERT_THAT(basic.status(), IsOk());
  EXPECT_THAT((*basic)->skipped(), ElementsAre("blob", "opt.param_groups.0.lr", "step"));
  const auto every = [](const std::string&) { return true; };
  EXPECT_THAT((*basic)->SkippedWarning(every),
              HasSubstr("3 non-tensor items are not read (shardkit moves tensors only): blob, "
                        "opt.param_groups.0.lr, step"));
  const std::vector<CheckpointFile>& files = (*basic)->identity();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, ".metadata");
  EXPECT_EQ(files[0].digest, (*basic)->metadata().digest);
  EXPECT_TRUE(files[0].whole);
  EXPECT_EQ(files[1].name, "__0_0.distcp");
  EXPECT_EQ(files[1].size, fs::file_size(FixturePath("basic/__0_0.distcp")));

  absl::StatusOr<std::unique_ptr<DcpSource>> local =
      DcpSource::Open(FixturePath("local"), kStaging);
  ASSERT_THAT(local.status(), IsOk());
  EXPECT_EQ((*local)->identity()[0].name, "__0.metadata+__1.metadata+__2.metadata+__3.metadata");
  EXPECT_EQ((*local)->SkippedWarning(every), "");
  // Only the items a selection picks are named.
  EXPECT_THAT((*basic)->SkippedWarning([](const std::string& key) { return key != "blob"; }),
              HasSubstr("2 non-tensor items are not read (shardkit moves tensors only): "
                        "opt.param_groups.0.lr, step"));
}

TEST(DcpSourceTest, RefusesAMissingOrTruncatedFile) {
  const std::string missing = CopyOf("sharded");
  fs::remove(missing + "/__2_0.distcp");
  EXPECT_THAT(DcpSource::Open(missing, kStaging).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("__2_0.distcp: no such file")));

  const std::string truncated = CopyOf("sharded");
  fs::resize_file(truncated + "/__1_0.distcp", 1000);
  EXPECT_THAT(DcpSource::Open(truncated, kStaging).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("__1_0.distcp")));

  EXPECT_THAT(DcpSource::Open(FixturePath("safetensors"), kStaging).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SAFETENSORS")));
}

TEST(DcpSourceTest, SeesAFileReplacedAfterItWasOpened) {
  const std::string dir = CopyOf("sharded");
  absl::StatusOr<std::unique_ptr<DcpSource>> source = DcpSource::Open(dir, kStaging);
  ASSERT_THAT(source.status(), IsOk());
  fs::copy_file(dir + "/__3_0.distcp", dir + "/other");
  fs::rename(dir + "/other", dir + "/__3_0.distcp");
  // `rows` has a chunk in every file (the fourth one empty, still an item of __3_0.distcp).
  const std::vector<safetensors::TensorInfo>& tensors = (*source)->header().tensors;
  size_t rows = 0;
  while (rows < tensors.size() && tensors[rows].name != "rows") ++rows;
  ASSERT_LT(rows, tensors.size());
  EXPECT_THAT((*source)->CheckUnchanged(rows),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("__3_0.distcp: was replaced while open")));
}

}  // namespace
}  // namespace shardkit::checkpoint
