// FormatDemoSummary on a DemoReport built by hand: the layers' rows grouped, each verdict, the
// start other summaries are recognised by.
#include "integration/cli/demo_summary.h"

#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/demo/synthetic_model.h"
#include "testing/status_matchers.h"

namespace shardkit::cli {
namespace {

using ::testing::HasSubstr;

constexpr demo::SyntheticModelConfig kSmall = {
    .layers = 2, .hidden = 8, .vocab = 10, .positions = 4};

TEST(DemoSummaryTest, GroupsLayersAndReportsMismatches) {
  demo::DemoReport report;
  report.model = kSmall;
  report.world_size = 2;
  report.backend = "gloo";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(report.plan, specs::ParsePlan(demo::DemoPlanJson(kSmall, 2)));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(report.parameters,
                                specs::Resolve(report.plan, demo::SyntheticParameters(kSmall), 2));
  report.ranks.resize(2);
  const std::string summary = FormatDemoSummary(report);
  EXPECT_TRUE(absl::StartsWith(summary, kDemoSummaryStart)) << summary;
  EXPECT_THAT(summary, HasSubstr("21 parameters"));
  EXPECT_THAT(
      summary,
      ::testing::ContainsRegex(
          R"(layers\.\*\.attn\.out\.weight ×2 +\[8, 8\] +columns \(chunk dim 1\) +\[8, 4\] +\[8, 4\])"));
  EXPECT_THAT(summary, HasSubstr("verified: all 21 parameters bit-exact (sharded ones gathered to "
                                 "rank 0 on cpu,"));
  EXPECT_THAT(summary, HasSubstr("2 ranks, backend gloo, strategy scatter"));
  report.device = Device::Cuda(0);  // the NCCL demo's: the header and verdict name the device
  report.backend = "nccl";
  const std::string on_cuda = FormatDemoSummary(report);
  EXPECT_THAT(on_cuda, HasSubstr("backend nccl (tensors on cuda:LOCAL_RANK), strategy scatter"));
  EXPECT_THAT(on_cuda, HasSubstr("gathered to rank 0 on cuda:0,"));
  report.ranks[1].mismatches = 1;
  report.ranks[0].mismatches = 1;
  report.mismatched = {"embed.weight"};
  EXPECT_FALSE(report.verified());
  EXPECT_THAT(FormatDemoSummary(report),
              HasSubstr("verification FAILED: parameters differing (rank 0: 1, rank 1: 1); on "
                        "rank 0: embed.weight"));
}

}  // namespace
}  // namespace shardkit::cli
