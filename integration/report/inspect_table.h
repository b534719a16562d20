// FormatInspection: how `shardkit inspect` and `spec check --checkpoint` print a
// checkpoint::Inspection (integration/checkpoint/inspect.h) on stdout — its columns and rows as
// one table (core/base/text_table.h), then, after a blank line, its facts, metadata and files as
// a second table, when it has any:
//
//   name  dtype  shape   bytes
//   w     F32    [4, 8]  128
//
//   metadata  format  pt
//   file      model-00001-of-00002.safetensors
#ifndef SHARDKIT_INTEGRATION_REPORT_INSPECT_TABLE_H_
#define SHARDKIT_INTEGRATION_REPORT_INSPECT_TABLE_H_

#include <string>

#include "integration/checkpoint/inspect.h"

namespace shardkit::report {

// The facts are `label value` lines, the metadata `metadata key value` and the files `file path`,
// in that order.
std::string FormatInspection(const checkpoint::Inspection& inspection);

}  // namespace shardkit::report

#endif  // SHARDKIT_INTEGRATION_REPORT_INSPECT_TABLE_H_
