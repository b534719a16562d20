// OutputKind: one output format's directory rules, as OutputDirectory (output_directory.h) needs
// them — which file names are its output (or an interrupted run's of it), when DIR's files of
// that format are a complete output and whether they are shardkit's at all, the file a run writes
// last (its commit), and what a run writes first. Each format states its own (a shard directory:
// formats/shard_dir/shard_dir_output.h; a DCP checkpoint: formats/dcp/dcp_output.h); the
// checkpoint library, which knows every format, passes them (integration/checkpoint/
// output_format.h). Implementations are stateless and thread-safe.
#ifndef SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_KIND_H_
#define SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_KIND_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::formats {

class OutputKind {
 public:
  virtual ~OutputKind() = default;

  // Whether `name` (a file name in DIR, not a temporary) is one this format's output, or an
  // interrupted run writing it, may leave.
  virtual bool IsOutputFile(std::string_view name) const = 0;

  // DIR's files of this format (IsOutputFile; temporaries excluded), all of them: whether they
  // are a complete output. Errors: kInvalidArgument naming DIR when they are not shardkit's (a
  // run replaces only its own output).
  [[nodiscard]] virtual absl::StatusOr<bool> Examine(
      const std::string& dir, const std::vector<std::string>& names) const = 0;

  // The file a run writes last into the directory it writes to: the commit of its output.
  virtual std::string_view last_file_name() const = 0;

  // A file a run writes first and a clearing removes last, so that even an interrupted run's
  // files are known as shardkit's; "" if the format has none.
  virtual std::string_view marker() const { return {}; }

  // Writes marker() into `write_dir` (durably, whole). Errors: as os::WriteFileAtomically.
  [[nodiscard]] virtual absl::Status WriteMarker(const std::string& write_dir) const {
    return absl::OkStatus();
  }
};

// The formats whose output a directory may hold, in the order their rules are asked.
using OutputKinds = std::vector<const OutputKind*>;

}  // namespace shardkit::formats

#endif  // SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_KIND_H_
