// What the UCX backend reads of UCX's own words: the transports in ucp_context_print_info's text,
// and the check of UCX_TLS against them (no UCX needed: the text is UCX 1.13's, as printed here).
#include "backends/ucx/internal/ucx_context.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace shardkit::ucx_backend {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;

constexpr char kInfo[] = R"(#
# UCP context
#
#     component 0  :  self
#     component 1  :  tcp
#            md 0  :  component 0  self
#
#      resource 0  :  md 0  dev 0  flags -- self/memory0
#      resource 1  :  md 1  dev 1  flags -- tcp/lo
#      resource 2  :  md 1  dev 2  flags -- tcp/eth0
#      resource 3  :  md 2  dev 3  flags -- sysv/memory
#      resource 4  :  md 3  dev 3  flags -- posix/memory
#      resource 5  :  md 4  dev 3  flags -- cma/memory
#
)";

TEST(UcxContext, TransportsInInfoAreTheResourcesOnce) {
  EXPECT_THAT(TransportsInInfo(kInfo), ElementsAre("self", "tcp", "sysv", "posix", "cma"));
  EXPECT_THAT(TransportsInInfo(""), ElementsAre());
}

TEST(UcxContext, RequestedTransportsByNameOrAlias) {
  const std::vector<std::string> found = TransportsInInfo(kInfo);
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, nullptr));
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, ""));
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, "tcp,self"));
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, "sm,self"));
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, "all"));
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, "^tcp"));
  SHARDKIT_EXPECT_OK(CheckRequestedTransports(found, "posix,tcp:aux"));
}

TEST(UcxContext, MissingTransportNamesWhatWasFound) {
  const std::vector<std::string> found = TransportsInInfo(kInfo);
  EXPECT_THAT(CheckRequestedTransports(found, "rc,sm"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "UCX_TLS asks for rc, which this host lacks (found: self, tcp, sysv, "
                       "posix, cma)"));
  EXPECT_THAT(CheckRequestedTransports(found, "ib, dc_x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("UCX_TLS asks for ib, dc_x, which this host lacks")));
}

}  // namespace
}  // namespace shardkit::ucx_backend
