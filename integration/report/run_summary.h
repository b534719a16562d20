// The summaries `shardkit shard`, `reshard` and `gather` print on stderr when they succeed, laid
// out from what the library returns (checkpoint::ShardRunReport, checkpoint::GatherReport):
//
//   shardkit shard: 3 parameters (2 sharded, 1 replicated) on 2 ranks, scatter from rank 0
//     planned in 0.004 s; streamed 1.5 KiB in 1 rounds in 0.001 s (1.2 MiB/s), memory budget
//     512 MiB per rank, total 0.006 s
//     rank  file                    tensors         bytes   peak_rss_mib   rss_growth_mib
//     0     rank-00000.safetensors        3           768           10.2              0.0
//     1     rank-00001.safetensors        3           768            9.8              0.0
//
//   shardkit gather: 3 parameters (1.5 KiB) from 2 rank files to out.safetensors in 0.001 s
//   (1.2 MiB/s), peak RSS 9.1 MiB
//
// (the second line of each is one line in the output). Plain text, lines ending in '\n'.
#ifndef SHARDKIT_INTEGRATION_REPORT_RUN_SUMMARY_H_
#define SHARDKIT_INTEGRATION_REPORT_RUN_SUMMARY_H_

#include <string>

#include "integration/checkpoint/gather_checkpoint.h"
#include "integration/checkpoint/shard_run_report.h"

namespace shardkit::report {

// The totals (two lines), then a header row and one row per rank of `report.ranks`; a reshard's
// rows add the bytes each rank read and the old rank files it read them from.
std::string FormatShardSummary(const checkpoint::ShardRunReport& report);

// One line. Its target is the file written, or for a Hugging Face output of several files
// "DIR (N files and INDEX)".
std::string FormatGatherSummary(const checkpoint::GatherReport& report);

}  // namespace shardkit::report

#endif  // SHARDKIT_INTEGRATION_REPORT_RUN_SUMMARY_H_
