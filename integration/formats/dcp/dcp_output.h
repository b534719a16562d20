// DcpOutput: a PyTorch DCP checkpoint as shardkit's output (formats/output_file/output_writer.h).
// Its rules: its files are DCP's (dcp_files.h) and shardkit's marker
// kMarkerName, which a run writes first (torch ignores it) so that even an interrupted run's
// `.distcp` files are known as shardkit's; it is complete once `.metadata` (written last: the
// commit) is there beside the marker. DCP files without the marker are a checkpoint torch wrote
// (or an unfinished save of one), which shardkit never replaces.
// Its files: each rank's `__R_0.distcp` and the source's `.metadata` (dcp_rank_file.h); it holds
// non-tensor items.
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_OUTPUT_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_OUTPUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "integration/formats/output_file/output_writer.h"

namespace shardkit::dcp {

// The file that marks a DCP checkpoint as shardkit's.
inline constexpr char kMarkerName[] = ".shardkit-output";

class DcpOutput : public formats::OutputWriter {
 public:
  bool IsOutputFile(std::string_view name) const override;
  // Errors: kInvalidArgument naming DIR and its DCP files when the marker is missing (a
  // checkpoint, or an unfinished save, that shardkit did not write).
  absl::StatusOr<bool> Examine(const std::string& dir,
                               const std::vector<std::string>& names) const override;
  std::string_view last_file_name() const override;
  std::string_view marker() const override { return kMarkerName; }
  absl::Status WriteMarker(const std::string& write_dir) const override;

  std::string_view format_name() const override { return "dcp"; }
  std::string_view description() const override { return "a DCP checkpoint"; }
  bool holds_items() const override { return true; }
  std::string RankFileName(int rank) const override;
  // Errors: as CreateDcpRankFile (dcp_rank_file.h).
  absl::Status CreateRankFile(const std::string& dir, int rank,
                              const formats::OutputContent& content,
                              formats::RankFile& file) const override;
  std::vector<int64_t> RankFileTensors(const formats::OutputContent& content) const override;
  // `.metadata` (MakeDcpMetadata). Errors: as MakeDcpMetadata and os::WriteFileAtomically.
  absl::Status WriteLastFile(const std::string& dir,
                             const formats::OutputContent& content) const override;
};

}  // namespace shardkit::dcp

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_DCP_OUTPUT_H_
