// OutputDirectory: the directory that `shardkit shard`, `shardkit reshard` and SaveShards write
// their output into, and how a run replaces what it holds without ever losing it. What an output
// is comes from the formats' own rules (OutputKind, output_kind.h): the format being written and
// every format whose earlier output DIR may hold (the checkpoint library passes them:
// integration/checkpoint/output_format.h — a shard directory, formats/shard_dir/shard_dir_output.h,
// and a PyTorch DCP checkpoint, formats/dcp/dcp_output.h).
//
// What DIR may hold before a run: nothing, or shardkit's own output only — files that some
// known format names as its output (IsOutputFile), their temporaries, `.shardkit.lock`, each
// format's files accepted by that format (Examine: e.g. an index.json that begins with
// {"format":"shardkit-shards"}; `.distcp` files only beside shardkit's marker). Anything else
// refuses the run, naming it.
//
// How a run writes (the commit is the step after which DIR holds the new output):
//  - DIR holds no complete output (missing, empty, or an interrupted run's files): the run clears
//    those and writes into DIR itself; its last file (index.json, or `.metadata`) is the commit.
//  - DIR holds a complete output: the run writes into a new directory beside it,
//    PARENT/.NAME.shardkit-new-<16 hex digits> (same file system, DIR's mode, owner and group
//    where allowed), and the commit swaps the two (os::ExchangeDirectories: one atomic rename),
//    then removes the earlier output. A file system that cannot exchange (NFS) gets two renames
//    instead, with interrupts held: DIR aside to PARENT/.NAME.shardkit-old-HEX, the new output in
//    its place; a run killed between them leaves no DIR, and the next run into DIR puts the
//    earlier output back first.
// So at every instant DIR holds the complete earlier output or the complete new one (or, on a
// file system that cannot exchange, nothing for the instant between two renames). Replacing
// needs room for both on the disk (not checked beforehand: a full disk fails the run, leaving DIR
// as it was), a DIR that is not a mount point, a writable PARENT, and, in a sticky PARENT, a DIR
// of one's own; where one is missing the run is refused before anything is written. A run that
// fails removes what it wrote (the new directory, or DIR's new files); what a killed run leaves
// (the directories beside, files in DIR) is removed by the next run into DIR, under DIR's lock.
//
// The ranks of a run (one of them the owner: the source, or rank 0), between agreement rounds:
//
//   SHARDKIT_ASSIGN_OR_RETURN(OutputDirectory out,                     // every rank
//                             OutputDirectory::Prepare(dir, writing, known, /*owner=*/is_owner));
//   if (is_owner) SHARDKIT_RETURN_IF_ERROR(out.Begin());  // lock, clear, choose
//   ... the owner's out.place() reaches every rank (an AllGather) ...
//   if (!is_owner) SHARDKIT_RETURN_IF_ERROR(out.Follow(place));
//   ... every rank writes into out.write_dir(); the owner writes its last file there ...
//   if (is_owner) SHARDKIT_RETURN_IF_ERROR(out.Commit());
//   // on any failure, every rank: out.Abandon();
//
// The place is shared rather than found by each rank so that every rank writes where the owner
// decided under the lock; a rank that does not see the owner's new directory is on another file
// system (another host's disk) and fails the run: replacing an output needs a file system every
// rank shares. (Into a DIR without a complete output, ranks on other hosts write into their own
// DIR, as before.) Not thread-safe; one run per object.
#ifndef SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_DIRECTORY_H_
#define SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_DIRECTORY_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/dir_lock.h"
#include "core/os/files.h"
#include "core/os/interrupt.h"
#include "integration/formats/output_file/output_kind.h"

namespace shardkit::formats {

// What a directory holds, as far as replacing it goes.
struct OutputContents {
  bool complete = false;  // a complete shardkit output of some format (OutputKind::Examine)
  bool any = false;       // any output file (complete or an interrupted run's), lock aside
};

// Examines DIR's entries against `kinds` (see the file comment). A missing DIR holds nothing.
// Errors: kInvalidArgument naming DIR and the first entry that is no known format's, or a
// format's own refusal (OutputKind::Examine), or the OS error.
[[nodiscard]] absl::StatusOr<OutputContents> ExamineOutputDir(const std::string& dir,
                                                              const OutputKinds& kinds);

class OutputDirectory {
 public:
  // Every rank, first: checks what DIR holds (ExamineOutputDir with `known`, which includes
  // `writing`: the format this run writes; both outlive the object). The owner creates a missing
  // DIR and its missing parents (removed again by Abandon); the others leave it to Follow.
  // Errors: as ExamineOutputDir; as os::CreatedDirectories::Make.
  [[nodiscard]] static absl::StatusOr<OutputDirectory> Prepare(const std::string& dir,
                                                               const OutputKind& writing,
                                                               OutputKinds known, bool owner);

  OutputDirectory(OutputDirectory&&) = default;
  OutputDirectory& operator=(OutputDirectory&&) = default;

  // The owner, once every rank prepared: takes DIR's lock (held until Commit or Abandon), examines
  // DIR again under it, removes what killed runs left beside DIR, and chooses where this run
  // writes: into DIR (cleared of an interrupted run's files) or into a new directory beside it.
  // The format's marker (OutputKind::marker), if it has one, is written there now. Errors:
  // kInvalidArgument as Prepare, when another run holds the lock, when DIR holds a complete output
  // that cannot be replaced here (DIR is `/` or a mount point, PARENT is not writable or is sticky
  // and DIR another user's), naming why, or when an interrupted run's files cannot be removed;
  // kUnavailable if DIR cannot be synced.
  [[nodiscard]] absl::Status Begin();

  // What the owner shares with the other ranks after Begin: "" (DIR itself) or the name of the
  // new directory beside DIR.
  const std::string& place() const { return place_; }

  // Every rank but the owner, with the owner's place(): writes go there. Creates DIR if this rank
  // does not see it (another host's disk) and `place` is "". Errors: kInvalidArgument if `place`
  // names a directory this rank does not see beside DIR, or is "" and this rank's DIR holds a
  // complete output (either way not a file system every rank shares), or as
  // os::CreatedDirectories::Make.
  [[nodiscard]] absl::Status Follow(std::string_view place);

  // The directory the output's files go to: DIR, or the new directory beside it.
  const std::string& write_dir() const { return write_dir_; }
  // Whether this run replaces a complete earlier output (writes beside DIR).
  bool replacing() const { return !place_.empty(); }
  // The file the owner writes last into write_dir(), before Commit (OutputKind::last_file_name:
  // index.json, or a DCP checkpoint's .metadata).
  std::string last_file_name() const;
  // What Begin found worth a word: an interrupted run's temporary files left alone because their
  // process still runs (os::LeftAloneWarning), for the caller to print.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The owner, once its last file is in write_dir(): puts the new output in place (a swap, then
  // the earlier output removed, durably) and releases the lock. Errors: kInvalidArgument if the
  // swap fails (nothing changed: DIR holds the earlier output — or, where two renames failed
  // halfway, the message says where it is and the next run puts it back); kUnavailable if the
  // final sync fails (the new output is in place but may not survive a crash).
  [[nodiscard]] absl::Status Commit();

  // A failed run, every rank: removes what this run wrote — the owner the new directory, or, in
  // DIR, every output file but a running process's temporaries; DIR itself if this rank created
  // it and it is then empty — and releases the lock. Best effort.
  void Abandon();

  // The owner, after Begin: commit by two renames (DIR aside, the new output in its place), as
  // where the file system cannot exchange, to test that path on any file system.
  void SetAsideForTest() { exchanges_ = false; }

  // The owner of a command-line run: from now until the object goes, an interrupt (SIGINT,
  // SIGTERM, SIGHUP) prints "<program>: interrupted (SIG…): removed … <scope>; <state>", the
  // state exact at every instant: DIR still holds the earlier output, untouched; holds no
  // output (nor did it before); was removed (this run created it); holds the complete new output.
  void ReportInterrupts(std::string program, std::string scope);

 private:
  OutputDirectory() = default;
  absl::Status ChooseReplacing();
  absl::Status ClearInPlace();
  absl::Status Exchange();
  absl::Status SetAsideAndMove();
  std::string SetAsidePath() const;
  void MarkCommitted();
  void SetReport(bool committed);
  std::string Untouched() const;
  std::string NoOutput() const;
  std::string Removed() const;

  std::string dir_;  // as given
  const OutputKind* writing_ = nullptr;
  OutputKinds known_;
  bool owner_ = false;
  OutputContents contents_;                // as Prepare (then Begin) found DIR
  os::CreatedDirectories created_;         // DIR and its parents, if this rank made them
  std::optional<os::DirectoryLock> lock_;  // the owner, from Begin
  std::string real_;                       // DIR resolved (symbolic links followed), once it exists
  std::string suffix_;     // replacing: the hex digits of the directories beside real_
  std::string place_;      // "" or the new directory's name beside real_
  bool exchanges_ = true;  // replacing: the file system swaps two directories in one step
  std::string write_dir_;  // dir_ or the new directory's path
  std::vector<std::string> warnings_;
  bool cleared_ = false;  // the owner, in place: DIR's output files are this run's to remove
  bool committed_ = false;
  os::InterruptCleanup staging_cleanup_;  // the new directory, removed on interrupt if empty
  std::string program_, scope_;           // ReportInterrupts
  std::unique_ptr<os::ScopedInterruptReport> report_;
};

}  // namespace shardkit::formats

#endif  // SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_DIRECTORY_H_
