#include "core/store/store_url.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit {
namespace {

using ::absl::StatusCode;
using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Parses `text`, a redis:// or tcp:// URL, and expects these parts and canonical form.
void ExpectHostUrl(const std::string& text, StoreUrl::Kind kind, const std::string& host, int port,
                   const std::string& prefix, const std::string& canonical) {
  SCOPED_TRACE(text);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(StoreUrl url, ParseStoreUrl(text));
  EXPECT_EQ(url.kind, kind);
  EXPECT_EQ(url.host, host);
  EXPECT_EQ(url.port, port);
  EXPECT_EQ(url.prefix, prefix);
  EXPECT_EQ(url.ToString(), canonical);
}

TEST(StoreUrlTest, ParsesFileAndRedis) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(StoreUrl file, ParseStoreUrl("file:///data/run1/"));
  EXPECT_EQ(file.kind, StoreUrl::Kind::kFile);
  EXPECT_EQ(file.path, "/data/run1");
  EXPECT_EQ(file.ToString(), "file:///data/run1");

  ExpectHostUrl("redis://10.0.0.5:7000/jobs/a/", StoreUrl::Kind::kRedis, "10.0.0.5", 7000, "jobs/a",
                "redis://10.0.0.5:7000/jobs/a");
  ExpectHostUrl("redis://localhost", StoreUrl::Kind::kRedis, "localhost", 6379, "",
                "redis://localhost:6379");
}

TEST(StoreUrlTest, RejectsBadUrls) {
  EXPECT_THAT(ParseStoreUrl("/data/run1"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown scheme")));
  EXPECT_THAT(ParseStoreUrl("file://"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseStoreUrl("file://host/dir"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("absolute path")));
  EXPECT_THAT(ParseStoreUrl("redis://:6379"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing host")));
  EXPECT_THAT(ParseStoreUrl("redis://h:0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad port \"0\"")));
  EXPECT_THAT(ParseStoreUrl("redis://h:http/x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad port \"http\"")));
}

TEST(StoreUrlTest, ParsesTcp) {
  ExpectHostUrl("tcp://host-a:29500/jobs/", StoreUrl::Kind::kTcp, "host-a", 29500, "jobs",
                "tcp://host-a:29500/jobs");
  ExpectHostUrl("tcp://127.0.0.1:0", StoreUrl::Kind::kTcp, "127.0.0.1", 0, "", "tcp://127.0.0.1:0");
  EXPECT_THAT(ParseStoreUrl("tcp://host-a"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("a tcp:// URL needs a port")));
  EXPECT_THAT(ParseStoreUrl("tcp://:29500"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing host")));
  EXPECT_THAT(ParseStoreUrl("tcp://h:65536"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad port \"65536\"")));
  EXPECT_THAT(ParseStoreUrl("tcp://h:-1"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bad port \"-1\""), HasSubstr("tcp://host:port"))));
  EXPECT_THAT(StoreUrlWithSubPrefix("tcp://h:1", "run-1"), IsOkAndHolds("tcp://h:1/run-1"));
}

TEST(StoreUrlTest, SubPrefix) {
  EXPECT_THAT(StoreUrlWithSubPrefix("file:///data", "run-1"), IsOkAndHolds("file:///data/run-1"));
  EXPECT_THAT(StoreUrlWithSubPrefix("file:///", "run-1"), IsOkAndHolds("file:///run-1"));
  EXPECT_THAT(StoreUrlWithSubPrefix("redis://h:1/jobs", "run-1"),
              IsOkAndHolds("redis://h:1/jobs/run-1"));
  EXPECT_THAT(StoreUrlWithSubPrefix("redis://h:1", "run-1"), IsOkAndHolds("redis://h:1/run-1"));
  EXPECT_THAT(StoreUrlWithSubPrefix("file:///data", "a/b"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no '/'")));
}

TEST(StoreUrlTest, OpensFileStore) {
  const std::string dir = testing::TestPath("url_store");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, OpenStore("file://" + dir));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, OpenStore("file://" + dir + "/"));
  ASSERT_THAT(a->Set("k", "v"), IsOk());
  EXPECT_THAT(b->Get("k", absl::Seconds(1)), IsOkAndHolds("v"));
}

TEST(StoreUrlTest, FileStoreBelowRegularFileFails) {
  const std::string file = testing::TestPath("plain_file");
  std::ofstream(file) << "x";
  EXPECT_THAT(OpenStore("file://" + file + "/store"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
}

}  // namespace
}  // namespace shardkit
