// FormatSpecCheck: what `shardkit spec check` prints on stdout for a checkpoint::SpecCheck
// (integration/checkpoint/spec_check.h) — the canonical JSON and its fingerprint, one line each,
// then for a spec bound to a shape its shards as a table:
//
//   {"dim":0,"placements":[{"rank":0},{"rank":1}]}
//   sha256:…
//   index  rank  offsets  sizes
//   0      0     [0, 0]   [6, 4]
//   1      1     [6, 0]   [6, 4]
//
// or, for a dry run, the table `inspect` would print of the output (FormatInspection).
#ifndef SHARDKIT_INTEGRATION_REPORT_SPEC_TEXT_H_
#define SHARDKIT_INTEGRATION_REPORT_SPEC_TEXT_H_

#include <string>

#include "integration/checkpoint/spec_check.h"

namespace shardkit::report {

std::string FormatSpecCheck(const checkpoint::SpecCheck& check);

}  // namespace shardkit::report

#endif  // SHARDKIT_INTEGRATION_REPORT_SPEC_TEXT_H_
