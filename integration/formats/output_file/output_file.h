// What may stand at the path a command writes a file to (`gather --out`, `tp_mlp_train --out`,
// `demo --summary`): the checks run before anything is written, so that a mistyped OUT refuses
// (exit 2) instead of replacing the input the run reads, a device node, or an unrelated file.
//
//   SHARDKIT_RETURN_IF_ERROR(formats::CheckOutputFile(out, {.keep_out_of = {{in_dir,
//       "the shard directory it would be read from"}}}));
//   ... write OUT with os::AtomicFile, whose Commit re-checks CheckOutputType just before its
//   rename (something put at OUT meanwhile is not replaced) ...
//
// Self-contained (core/os, absl, nlohmann's validator): no shardkit format is read here; a
// safetensors file is recognised by its first bytes alone.
#ifndef SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_FILE_H_
#define SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/os/files.h"  // CheckOutputType

namespace shardkit::formats {

// A path a run reads (or writes besides OUT) that OUT must neither be nor lie inside.
struct KeepOutOf {
  std::string path;         // a file or a directory
  std::string description;  // for messages: "the shard directory it would be read from"
};

// What an existing regular file at OUT must be for the run to replace it.
enum class ExistingOutput {
  kSafetensors,  // a safetensors file (IsSafetensorsFile)
  kText,         // an empty file, or one whose bytes begin with OutputRules::text_signature
};

struct OutputRules {
  std::string name = "the output file";  // how messages name OUT ("--summary")
  std::vector<KeepOutOf> keep_out_of;
  ExistingOutput existing = ExistingOutput::kSafetensors;
  std::string text_signature;  // kText: how an earlier output of this kind begins
  std::string text_kind;       // kText, for messages: "an earlier summary"
};

// The largest safetensors header IsSafetensorsFile reads (the format's own limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

// Checks `out` before anything is written to it, in this order:
//  1. `out` names a file: it does not end in '/', ".", "..".
//  2. `out` is none of rules.keep_out_of, nor inside one: the real path of OUT's parent
//     (symbolic links and ".." resolved, as far as it exists) joined with OUT's name is compared
//     with each one's real path — so `D/../D/index.json` and a linked parent are caught.
//  3. CheckOutputType (core/os/files.h): nothing is at `out`, or a regular file.
//  4. An existing file is what rules.existing allows (a safetensors file; an earlier text output).
// Errors: kInvalidArgument naming rules.name, `out` and what is wrong: "is inside the shard
// directory it would be read from (D): pick a path outside it", "is a symbolic link", "exists and
// is a character device", "exists and is not a safetensors file (…)", or the OS error if `out`
// cannot be examined.
[[nodiscard]] absl::Status CheckOutputFile(const std::string& out, const OutputRules& rules = {});

// Whether the regular file `path` is a safetensors file: at least 8 bytes, whose first 8 (a
// little-endian length N) satisfy N <= size - 8 and N <= kMaxSafetensorsHeaderBytes, and whose
// next N bytes are one JSON object. Does not follow a final symbolic link nor wait on a fifo.
// Errors: kInvalidArgument saying why not ("shorter than 8 bytes", "header length … exceeds …",
// "header is not a JSON object"), or naming the OS error if it cannot be read.
[[nodiscard]] absl::Status IsSafetensorsFile(const std::string& path);

}  // namespace shardkit::formats

#endif  // SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_FILE_H_
