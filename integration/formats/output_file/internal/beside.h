// What a run into an output directory DIR writes beside it, in DIR's parent, as
// .NAME<infix><16 hex digits> — the new output until the commit (kNewInfix), an empty directory
// that tells whether the file system swaps (kProbeInfix), and, where it does not, the earlier
// output set aside for the instant between two renames (kOldInfix) — and how a later run finds,
// removes or puts back what a killed run left there. Not API: OutputDirectory's
// (output_directory.h).
#ifndef SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_INTERNAL_BESIDE_H_
#define SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_INTERNAL_BESIDE_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "integration/formats/output_file/output_kind.h"

namespace shardkit::formats::internal {

inline constexpr char kNewInfix[] = ".shardkit-new-";
inline constexpr char kProbeInfix[] = ".shardkit-probe-";
inline constexpr char kOldInfix[] = ".shardkit-old-";

// The directories beside `dir` (absolute, normal) that runs into it wrote under `infix`.
std::vector<std::filesystem::path> BesideOf(const std::filesystem::path& dir, const char* infix);

// What killed runs into `real` left beside it (the caller holds its lock): new outputs never
// committed and probes; with `set_aside` (`real` holds a complete output again) an earlier output
// set aside by a commit that went through. Best effort.
void RemoveBesideOf(const std::filesystem::path& real, bool set_aside);

// Where a file system cannot swap, the commit sets DIR aside and moves the new output in: a run
// killed between the two renames leaves no DIR and the earlier output beside it. Puts it back,
// when DIR is missing and a complete output (of one of `kinds`) was set aside. Best effort.
void RecoverSetAside(const std::string& dir, const OutputKinds& kinds);

// Before anything is written, what a commit of `fresh` onto `real` will need (`suffix`: the run's
// hex digits, for its probe): a rename that does not cross a mount (a bind mount shares st_dev:
// RENAME_NOREPLACE fails with EXDEV there, with EEXIST where only `real` stands in the way), and
// whether the file system exchanges (two empty directories swapped and back). Returns whether it
// exchanges (else the commit sets `real` aside for an instant).
// Errors: kInvalidArgument naming what cannot be done.
[[nodiscard]] absl::StatusOr<bool> CanSwapInto(const std::string& fresh, const std::string& real,
                                               const std::string& suffix);

}  // namespace shardkit::formats::internal

#endif  // SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_INTERNAL_BESIDE_H_
