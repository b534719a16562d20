#include "integration/formats/dcp/dcp_files.h"

#include "gtest/gtest.h"

namespace shardkit::dcp {
namespace {

TEST(DcpFilesTest, NamesAndRanks) {
  EXPECT_EQ(DistcpFileName(0), "__0_0.distcp");
  EXPECT_EQ(DistcpFileName(12), "__12_0.distcp");
  EXPECT_EQ(DcpFileRank("__12_0.distcp"), 12);
  EXPECT_EQ(DcpFileRank("__3_7.distcp"), 3);
  for (const char* other : {"__3.distcp", "__x_0.distcp", "__3_.distcp", "_3_0.distcp",
                            "__3_0.distcp.tmp", "__-1_0.distcp", "rank-00000.safetensors"}) {
    EXPECT_EQ(DcpFileRank(other), -1) << other;
  }
  for (const char* file : {".metadata", "__0.metadata", "__17.metadata", "__2_0.distcp"}) {
    EXPECT_TRUE(IsDcpFileName(file)) << file;
  }
  for (const char* other :
       {"metadata", "__.metadata", "__a.metadata", "index.json", ".metadata2"}) {
    EXPECT_FALSE(IsDcpFileName(other)) << other;
  }
}

}  // namespace
}  // namespace shardkit::dcp
