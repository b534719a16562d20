// The names of the files of a PyTorch DCP checkpoint directory as FileSystemWriter writes them,
// and as shardkit writes one (`--format dcp`): `.metadata` (or, from
// dcp.save(use_collectives=False), `__R.metadata` per rank) and `__R_K.distcp`, the K-th data file
// of rank R (shardkit writes one per rank: K = 0).
//
//   DistcpFileName(3)                 // "__3_0.distcp"
//   DcpFileRank("__3_0.distcp")       // 3; -1 for any other name
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_FILES_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace shardkit::dcp {

inline constexpr char kMetadataFileName[] = ".metadata";

// "__R_0.distcp".
std::string DistcpFileName(int64_t rank);

// R of "__R_K.distcp" (decimal digits, no sign), else -1.
int64_t DcpFileRank(std::string_view name);

// Whether `name` is a file of a DCP checkpoint: `.metadata`, `__R.metadata` or `__R_K.distcp`.
bool IsDcpFileName(std::string_view name);

// For a directory holding a DCP save's data files but no metadata, what it is and what is
// missing ("DIR: a PyTorch DCP checkpoint folder without its metadata (.metadata): it holds
// __0_0.distcp and 3 more but no .metadata, …"); else "" (also when DIR cannot be listed).
std::string UnfinishedSave(const std::string& dir);

}  // namespace shardkit::dcp

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_FILES_H_
