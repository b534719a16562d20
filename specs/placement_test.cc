// The placement strings PyTorch's `_remote_device` accepts or rejects, each with shardkit's
// verdict under its own stricter grammar (docs/architecture.md, "JSON formats").
#include "specs/placement.h"

#include "testing/status_matchers.h"

namespace shardkit::specs {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PlacementTest, AcceptsTheGrammarAndRoundTrips) {
  struct Case {
    const char* text;
    int64_t rank;
    std::optional<Device> device;
  };
  const Case cases[] = {
      {"rank:0/cuda:0", 0, Device::Cuda(0)},  // PyTorch: (rank 0, cuda:0)
      {"rank:0", 0, std::nullopt},            // PyTorch: rank 0 on cpu; here: default device
      {"rank:0/cpu", 0, Device::Cpu()},
      {"rank:1/cuda:1", 1, Device::Cuda(1)},
      {"rank:3/cuda", 3, Device::Cuda()},
      {"rank:10/cpu", 10, Device::Cpu()},
      {"rank:2147483647", 2147483647, std::nullopt},
  };
  for (const Case& c : cases) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Placement p, Placement::Parse(c.text));
    EXPECT_EQ(p.rank(), c.rank) << c.text;
    EXPECT_EQ(p.device(), c.device) << c.text;
    EXPECT_EQ(p.ToString(), c.text);
  }
}

TEST(PlacementTest, DeviceIsKeptAsWritten) {
  // PyTorch treats "rank:0" == "rank:0/cpu"; shardkit keeps them apart (as written).
  EXPECT_NE(*Placement::Parse("rank:0"), *Placement::Parse("rank:0/cpu"));
  EXPECT_NE(*Placement::Parse("rank:0/cuda"), *Placement::Parse("rank:0/cuda:0"));
  EXPECT_EQ(Placement::ForRank(4, Device::Cuda(2)).ToString(), "rank:4/cuda:2");
}

TEST(PlacementTest, RejectsWorkerNamesAndDeviceOnlyStrings) {
  // PyTorch accepts all of these (worker names need RPC; device-only has no rank).
  for (const char* text :
       {"worker0", "worker0/cuda:0", "cpu", "cuda", "meta", "worker0/rank:1", "a/b/c", "/cpu"}) {
    EXPECT_THAT(Placement::Parse(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("must start with \"rank:\"; worker names and device-only "
                                   "placements are not supported")))
        << text;
  }
}

TEST(PlacementTest, RejectsMalformedPrefixes) {
  for (const char* text : {"cuda:1", "Rank:0/cpu", "worker:0/cpu", "foo:0", "cuda:foo", "cpu:0"}) {
    EXPECT_THAT(Placement::Parse(text), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("must start with \"rank:\"")))
        << text;
  }
  EXPECT_THAT(Placement::Parse(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid placement \"\"")));
}

TEST(PlacementTest, RejectsBadRanks) {
  // PyTorch accepts "rank:01/cpu" (rank 1) and "rank:٣/cpu" (Unicode digit 3).
  for (const char* text : {"rank:01/cpu", "rank:\u0663/cpu", "rank:-1/cpu", "rank:a/cpu",
                           "rank: 0/cpu", "rank:0:1/cpu", "rank:/cpu", "rank:", "rank:+1",
                           "rank:2147483648", "rank:99999999999999999999/cpu"}) {
    EXPECT_THAT(Placement::Parse(text), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("without sign or leading zeros")))
        << text;
  }
}

TEST(PlacementTest, RejectsDevicesOutsideCpuAndCuda) {
  // PyTorch accepts meta and cpu:0 (torch.device parses them); shardkit does not.
  for (const char* text :
       {"rank:0/foo", "rank:0/CPU", "rank:0/cuda:foo", "rank:0/cpu2", "rank:0/cuda:-1", "rank:0/",
        "rank:0/meta", "rank:0/cpu:0", "rank:0/cuda:01", "rank:0/cuda/cpu"}) {
    EXPECT_THAT(Placement::Parse(text), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("is not cpu, cuda or cuda:<N>")))
        << text;
  }
}

TEST(PlacementTest, ParseRankDigits) {
  EXPECT_EQ(ParseRankDigits("0"), 0);
  EXPECT_EQ(ParseRankDigits("42"), 42);
  EXPECT_EQ(ParseRankDigits("042"), std::nullopt);
  EXPECT_EQ(ParseRankDigits(""), std::nullopt);
  EXPECT_EQ(ParseRankDigits("4294967296"), std::nullopt);
}

}  // namespace
}  // namespace shardkit::specs
