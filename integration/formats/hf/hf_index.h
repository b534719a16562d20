// A Hugging Face checkpoint index read in (`model.safetensors.index.json`: its weight_map and
// metadata.total_size), its files opened and checked against it — what CheckpointSource
// (checkpoint/source/checkpoint_source.h) reads when `shard --checkpoint` names an index or a
// directory holding one. Writing one is hf_output.h.
//
//   SHARDKIT_ASSIGN_OR_RETURN(HfIndex index, ReadHfIndex(path));
//   std::vector<std::string> names, paths;
//   SHARDKIT_ASSIGN_OR_RETURN(auto files, OpenHfIndexFiles(path, index, names, paths));
//   SHARDKIT_RETURN_IF_ERROR(CheckHfIndex(path, index, names, files));
#ifndef SHARDKIT_INTEGRATION_FORMATS_HF_HF_INDEX_H_
#define SHARDKIT_INTEGRATION_FORMATS_HF_HF_INDEX_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::hf {

// The weight map of a Hugging Face index: tensor -> file (relative to the index), total_size, and
// the index file's own size and digest ("sha256:<hex>" of all its bytes).
struct HfIndex {
  std::map<std::string, std::string> file_of;
  std::optional<int64_t> total_size;
  uint64_t bytes = 0;
  std::string digest;
};

// Errors: as os::ReadWholeFile; kInvalidArgument for malformed JSON, no weight_map, or a file
// name that is empty, absolute or climbs out of the index's directory (naming the tensor).
[[nodiscard]] absl::StatusOr<HfIndex> ReadHfIndex(const std::string& path);

// Opens every file the index names (once each, in name order): `names` gets their names as the
// index gives them, `paths` their paths. Errors: as safetensors::Reader::Open, naming the index.
[[nodiscard]] absl::StatusOr<std::vector<safetensors::Reader>> OpenHfIndexFiles(
    const std::string& index, const HfIndex& map, std::vector<std::string>& names,
    std::vector<std::string>& paths);

// Every tensor of the map is in the file it names and no other; no file holds one it omits.
// Errors: kInvalidArgument naming the tensor and the files.
[[nodiscard]] absl::Status CheckHfIndex(const std::string& index, const HfIndex& map,
                                        const std::vector<std::string>& names,
                                        const std::vector<safetensors::Reader>& files);

// Appends a warning when metadata.total_size is neither the tensors' bytes nor the files'.
void WarnAboutHfTotalSize(const std::string& index, const HfIndex& map,
                          const std::vector<std::string>& paths,
                          const std::vector<safetensors::Reader>& files,
                          std::vector<std::string>* warnings);

}  // namespace shardkit::hf

#endif  // SHARDKIT_INTEGRATION_FORMATS_HF_HF_INDEX_H_
