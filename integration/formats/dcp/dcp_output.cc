#include "integration/formats/dcp/dcp_output.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "integration/formats/dcp/dcp_files.h"
#include "integration/formats/dcp/dcp_rank_file.h"
#include "integration/formats/dcp/metadata_writer.h"

namespace shardkit::dcp {
namespace {

constexpr char kMarkerText[] =
    "{\"format\": \"dcp\", \"written_by\": \"shardkit\", \"version\": 1}\n";

absl::Status ForeignDcp(const std::string& dir, std::vector<std::string> files, bool metadata) {
  std::sort(files.begin(), files.end());
  const std::string list = JoinFirst(files, 4);
  return absl::InvalidArgumentError(absl::StrCat(
      dir, ": holds ",
      metadata ? "a PyTorch DCP checkpoint" : "the files of an unfinished PyTorch DCP save",
      " that shardkit did not write (", list, "; no ", kMarkerName,
      "): shardkit replaces only its own output; use a new or empty directory (a DCP output of a "
      "shardkit older than the marker has none either: remove it yourself)"));
}

const formats::OutputItems& NoItems() {
  static const formats::OutputItems* const none = new formats::OutputItems;
  return *none;
}

// The source's items (none when the caller gave none).
const formats::OutputItems& ItemsOf(const formats::OutputContent& content) {
  return content.items != nullptr ? *content.items : NoItems();
}

}  // namespace

bool DcpOutput::IsOutputFile(std::string_view name) const {
  return name == kMarkerName || IsDcpFileName(name);
}

absl::StatusOr<bool> DcpOutput::Examine(const std::string& dir,
                                        const std::vector<std::string>& names) const {
  bool marker = false, metadata = false, any_metadata = false;
  std::vector<std::string> files;
  for (const std::string& name : names) {
    if (name == kMarkerName) {
      marker = true;
      continue;
    }
    files.push_back(name);
    metadata = metadata || name == kMetadataFileName;                  // what shardkit writes
    any_metadata = any_metadata || absl::EndsWith(name, ".metadata");  // or __R.metadata
  }
  if (!files.empty() && !marker) return ForeignDcp(dir, std::move(files), any_metadata);
  return metadata && marker;
}

std::string_view DcpOutput::last_file_name() const { return kMetadataFileName; }

absl::Status DcpOutput::WriteMarker(const std::string& write_dir) const {
  return os::WriteFileAtomically((std::filesystem::path(write_dir) / kMarkerName).string(),
                                 kMarkerText);
}

std::string DcpOutput::RankFileName(int rank) const { return DistcpFileName(rank); }

absl::Status DcpOutput::CreateRankFile(const std::string& dir, int rank,
                                       const formats::OutputContent& content,
                                       formats::RankFile& file) const {
  return CreateDcpRankFile(dir, rank, content.src_rank, content.tensors,
                           rank == content.src_rank ? ItemsOf(content) : NoItems(), file);
}

std::vector<int64_t> DcpOutput::RankFileTensors(const formats::OutputContent& content) const {
  std::vector<int64_t> count;
  for (int rank = 0; rank < content.world_size; ++rank) {
    count.push_back(DcpFileTensors(content.tensors, rank, content.src_rank));
  }
  return count;
}

absl::Status DcpOutput::WriteLastFile(const std::string& dir,
                                      const formats::OutputContent& content) const {
  SHARDKIT_ASSIGN_OR_RETURN(
      const Metadata metadata,
      MakeDcpMetadata(content.tensors, content.world_size, content.src_rank, ItemsOf(content)));
  return os::WriteFileAtomically((std::filesystem::path(dir) / kMetadataFileName).string(),
                                 SerializeMetadata(metadata));
}

}  // namespace shardkit::dcp
