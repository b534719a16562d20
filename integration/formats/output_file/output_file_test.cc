// CheckOutputFile on real paths: OUT inside the input (also through "..", a linked parent), a
// symbolic link, a directory, a fifo, a character device (mknod, as root), files that are or are
// not safetensors, earlier text outputs; CheckOutputType; IsSafetensorsFile's limits.
#include "integration/formats/output_file/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::formats {
namespace {

namespace fs = std::filesystem;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file's bytes: the 8-byte little-endian length, the header, the data.
std::string Safetensors(const std::string& header, const std::string& data = "") {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

constexpr char kTensor[] = R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";

OutputRules ReadingFrom(const std::string& dir) {
  return {.keep_out_of = {{dir, "the shard directory it would be read from"}}};
}

TEST(CheckOutputFileTest, NothingThereIsFine) {
  EXPECT_THAT(CheckOutputFile(testing::TestPath("output_file/absent.safetensors")), IsOk());
  EXPECT_THAT(CheckOutputFile(testing::TestPath("output_file/no/such/dir/x.safetensors")),
              IsOk());  // Create says
}

TEST(CheckOutputFileTest, InsideTheInputIsRefusedHoweverItIsSpelled) {
  const std::string dir = testing::TestPath("output_file/shards");
  Write(dir + "/index.json", "{}");
  Write(dir + "/rank-00000.safetensors", Safetensors(kTensor, "ab"));
  const std::string inside =
      " is inside the shard directory it would be read from (" + dir + "): pick a path outside it";
  for (const std::string& out :
       {dir + "/index.json", dir + "/rank-00000.safetensors", dir + "/../shards/index.json",
        dir + "/new.safetensors", dir + "/sub/dir/new.safetensors", dir + "/./index.json"}) {
    EXPECT_THAT(
        CheckOutputFile(out, ReadingFrom(dir)),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the output file " + out + inside)))
        << out;
  }
  const std::string link = testing::TestPath("output_file/link-to-shards");
  fs::create_directory_symlink(dir, link);
  EXPECT_THAT(CheckOutputFile(link + "/index.json", ReadingFrom(dir)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(inside)));
  EXPECT_THAT(CheckOutputFile(dir + "/index.json", ReadingFrom(link)),  // the input linked
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(" is inside ")));
  // A sibling whose name begins with the input's is outside it.
  EXPECT_THAT(CheckOutputFile(testing::TestPath("output_file/shards-gathered.safetensors"),
                              ReadingFrom(dir)),
              IsOk());
  EXPECT_THAT(CheckOutputFile(dir, ReadingFrom(dir)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(dir + " is the shard directory it would be read from (" + dir +
                                 "): pick another path")));
}

TEST(CheckOutputFileTest, TheInputFileItself) {
  const std::string in = testing::TestPath("output_file/in.safetensors");
  Write(in, Safetensors(kTensor, "ab"));
  const OutputRules rules{.keep_out_of = {{in, "the checkpoint it would be read from"}}};
  EXPECT_THAT(
      CheckOutputFile(testing::TestPath("output_file/../output_file/in.safetensors"), rules),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("is the checkpoint it would be read from (" + in + ")")));
  EXPECT_THAT(CheckOutputFile(testing::TestPath("output_file/trained.safetensors"), rules), IsOk());
}

TEST(CheckOutputFileTest, ADirectoryPathIsRefused) {
  for (const std::string& out :
       {testing::TestPath("output_file/x/"), testing::TestPath("output_file/."),
        testing::TestPath("output_file/x/..")}) {
    EXPECT_THAT(CheckOutputFile(out),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(" names a directory")))
        << out;
  }
}

TEST(CheckOutputFileTest, LinksAndSpecialFilesAreRefused) {
  const std::string target = testing::TestPath("output_file/target.safetensors");
  Write(target, Safetensors(kTensor, "ab"));
  const std::string link = testing::TestPath("output_file/link.safetensors");
  fs::create_symlink(target, link);  // even a link to a safetensors file
  EXPECT_THAT(CheckOutputFile(link),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the output file " + link + " is a symbolic link")));
  const std::string dangling = testing::TestPath("output_file/dangling.safetensors");
  fs::create_symlink(testing::TestPath("output_file/nothing"), dangling);
  EXPECT_THAT(CheckOutputFile(dangling),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a symbolic link")));
  const std::string dir = testing::TestPath("output_file/a-dir");
  fs::create_directories(dir);
  EXPECT_THAT(CheckOutputFile(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr(dir + " exists and is a directory, not a "
                                                             "regular file: refusing to replace")));
  const std::string fifo = testing::TestPath("output_file/a-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THAT(CheckOutputFile(fifo),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exists and is a fifo")));
  EXPECT_THAT(IsSafetensorsFile(fifo),  // does not wait for a writer
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a fifo")));
}

TEST(CheckOutputFileTest, ACharacterDeviceIsRefused) {
  const std::string node = testing::TestPath("output_file/null-copy");
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod: " << std::strerror(errno) << " (root, outside a sandbox, may)";
  }
  EXPECT_THAT(CheckOutputFile(node), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("exists and is a character device")));
  EXPECT_THAT(os::CheckOutputType(node, "--out"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--out " + node)));
}

TEST(CheckOutputFileTest, OnlyASafetensorsFileIsReplaced) {
  const std::string good = testing::TestPath("output_file/good.safetensors");
  Write(good, Safetensors(kTensor, "ab"));
  EXPECT_THAT(CheckOutputFile(good), IsOk());
  const std::string empty_header = testing::TestPath("output_file/empty-header.safetensors");
  Write(empty_header, Safetensors("{}  "));
  EXPECT_THAT(CheckOutputFile(empty_header), IsOk());
  const struct {
    const char* name;
    std::string bytes;
    const char* why;
  } bad[] = {
      {"notes.txt", "some notes of the user, which are no checkpoint\n", "header length of"},
      {"empty", "", "0 bytes long, shorter than a header length"},
      {"seven", "1234567", "7 bytes long"},
      {"long-length", Safetensors(kTensor).substr(0, 20), "beyond its 20 bytes"},
      {"array", Safetensors("[1, 2]"), "its header is not a JSON object"},
      {"broken", Safetensors("{\"w\": "), "its header is not a JSON object"},
      {"zero-length", Safetensors(""), "its header is not a JSON object"},
  };
  for (const auto& file : bad) {
    const std::string path = testing::TestPath(std::string("output_file/") + file.name);
    Write(path, file.bytes);
    EXPECT_THAT(CheckOutputFile(path), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("the output file " + path +
                                                          " exists and is not a safetensors "
                                                          "file (")))
        << file.name;
    EXPECT_THAT(IsSafetensorsFile(path),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(file.why)))
        << file.name;
  }
  // A length beyond the format's limit is not read, however large the file claims to be.
  const std::string huge = testing::TestPath("output_file/huge-length");
  std::string bytes = Safetensors("{}");
  const uint64_t length = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  Write(huge, bytes);
  ASSERT_EQ(::truncate(huge.c_str(), static_cast<off_t>(length + 8)), 0);  // sparse
  EXPECT_THAT(IsSafetensorsFile(huge), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("exceeds the format's limit")));
}

TEST(CheckOutputFileTest, TextOutputsReplaceOnlyAnEarlierOne) {
  const OutputRules rules{.name = "--summary",
                          .existing = ExistingOutput::kText,
                          .text_signature = "shardkit demo: ",
                          .text_kind = "an earlier summary"};
  const std::string earlier = testing::TestPath("output_file/summary.txt");
  Write(earlier, "shardkit demo: 12 parameters\n");
  EXPECT_THAT(CheckOutputFile(earlier, rules), IsOk());
  const std::string empty = testing::TestPath("output_file/mktemp-like");
  Write(empty, "");
  EXPECT_THAT(CheckOutputFile(empty, rules), IsOk());
  const std::string other = testing::TestPath("output_file/thesis.tex");
  Write(other, "shardkit");  // shorter than the signature
  EXPECT_THAT(CheckOutputFile(other, rules),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--summary " + other +
                                 " exists and is not an earlier summary "
                                 "(it is not empty and does not begin with \"shardkit demo: \")")));
  const std::string checkpoint = testing::TestPath("output_file/model.safetensors");
  Write(checkpoint, Safetensors(kTensor, "ab"));
  EXPECT_THAT(CheckOutputFile(checkpoint, rules),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an earlier summary")));
}

}  // namespace
}  // namespace shardkit::formats
