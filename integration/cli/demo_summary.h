// The summary `shardkit demo` prints, laid out from the demo library's demo::DemoReport
// (integration/demo/demo_rank.h): the model, one row per parameter (layers that agree are grouped
// as `layers.*.name ×L`) with its spec and each rank's shard shapes, one row per rank with bytes
// moved and peak memory, the verification verdict and the time of each step.
//
//   std::cout << FormatDemoSummary(report);  // on rank 0, after RunDemoRank
#ifndef SHARDKIT_INTEGRATION_CLI_DEMO_SUMMARY_H_
#define SHARDKIT_INTEGRATION_CLI_DEMO_SUMMARY_H_

#include <string>

#include "integration/demo/demo_rank.h"

namespace shardkit::cli {

// How every summary begins ("shardkit demo: 12 parameters, …"): what `demo --summary` recognises
// an earlier summary by.
inline constexpr char kDemoSummaryStart[] = "shardkit demo: ";

// Plain text, lines ending in '\n', beginning with kDemoSummaryStart; the last line is "verified:
// ..." or "verification FAILED: ...", preceded by the timing line. Everything it shows is known on
// every rank except the names of the parameters another rank found different.
std::string FormatDemoSummary(const demo::DemoReport& report);

}  // namespace shardkit::cli

#endif  // SHARDKIT_INTEGRATION_CLI_DEMO_SUMMARY_H_
