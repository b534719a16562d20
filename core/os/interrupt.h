// What an interrupted run removes before it dies: a process-wide table of the paths it is writing
// (temporary files, files of an output it would leave incomplete, directories it created), and a
// handler for SIGINT, SIGTERM and SIGHUP that removes them, prints one line saying what state the
// output is in, and dies of the signal (exit status 128 + signal, as before).
//
//   InstallInterruptHandlers();                  // once, in main()
//   SHARDKIT_ASSIGN_OR_RETURN(
//       InterruptCleanup temp,
//       InterruptCleanup::Register(path, CleanupKind::kTemporaryFile, [&] { return Create(path);
//       }));
//   ScopedInterruptReport report;
//   report.Set({.program = "shardkit shard", .state = "out holds no index.json"});
//   ...
//   temp.Release();                              // renamed into place: no longer ours to remove
//
// On SIGINT, the handler prints for instance
//   shardkit shard: interrupted (SIGINT): removed 1 temporary file; out holds no index.json
// and a process with no report set (a rank other than the source) prints nothing.
//
// Signal safety: the handler only calls access, unlink, rmdir, write, nanosleep, sigaction and
// raise,
// and reads what the registering threads published with atomic stores: a slot's path is written
// while the slot is claimed and read only once it is live; a report is never changed or freed
// once published. Registering counts itself in flight and gives up (kCancelled) once an interrupt
// has begun; the handler waits (at most kInFlightWaitMs) for registrations in flight, so a file
// created under a registration is either removed by the handler or never created. What the
// handler cannot cover: a registration in flight on the very thread the handler runs on (its
// file is not created yet and never will be), and more than kSlots paths at once (the extra ones
// are not registered: a later run removes their temporaries, os::RemoveDeadTemporaries).
#ifndef SHARDKIT_CORE_OS_INTERRUPT_H_
#define SHARDKIT_CORE_OS_INTERRUPT_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::os {

// How many paths can be registered at once (a gather keeps at most 17 files open, a rank one).
inline constexpr int kInterruptSlots = 64;
// How long the handler waits for registrations in flight, in milliseconds.
inline constexpr int kInFlightWaitMs = 100;
// How long removing a directory that is not empty yet is retried (the other ranks remove their
// temporary files from a shared directory at the same moment), in milliseconds.
inline constexpr int kDirectorySettleMs = 200;

enum class CleanupKind {
  kTemporaryFile,  // unlink; counted as "temporary files" in the report
  kOutputFile,     // a file of an output this run would leave incomplete: unlink, counted
  kOwnFile,        // another file of this run's, not counted (a lock file it holds)
  kDirectory,      // a directory this run created: rmdir if empty, the latest registered first
};

// One registered path. Movable, not copyable; the destructor releases the registration (it does
// not remove the path). Thread-safe: registrations may be made and released from any thread.
class InterruptCleanup {
 public:
  InterruptCleanup() = default;
  InterruptCleanup(InterruptCleanup&& other) noexcept;
  InterruptCleanup& operator=(InterruptCleanup&& other) noexcept;
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;
  ~InterruptCleanup() { Release(); }

  // Registers `path` (removed as `kind` says if the process is interrupted before Release), then
  // runs `create`, which makes the path exist; if `create` fails, nothing stays registered.
  // Errors: kCancelled if an interrupt has begun (`create` is not run); those of `create`. A path
  // longer than PATH_MAX - 1, or a full table, is not registered (`create` still runs).
  [[nodiscard]] static absl::StatusOr<InterruptCleanup> Register(
      const std::string& path, CleanupKind kind, absl::FunctionRef<absl::Status()> create);

  // Registers a path this process creates otherwise: a lock file once it is held, the final name
  // of a file an AtomicFile renames into place. Not registered (an empty registration) once an
  // interrupt has begun.
  static InterruptCleanup Register(const std::string& path, CleanupKind kind);

  // The path is no longer removed on interrupt (it was renamed, removed, or is kept).
  void Release();
  bool registered() const { return slot_ >= 0; }

 private:
  explicit InterruptCleanup(int slot) : slot_(slot) {}
  int slot_ = -1;
};

// What the line printed on interrupt says: "<program>: interrupted (SIG…): removed N temporary
// files[ and M written files][ <scope>]; <state>". The state is the first that applies of:
//   state_if_removed          the handler removed a directory registered as kDirectory;
//   state_if_outputs_removed  (if not empty) it removed files registered as kOutputFile;
//   state_if_probe_present    (if `probe` is not empty) `probe` existed when the handler began;
//   state                     otherwise.
// The probe makes the line exact at every instant: e.g. the index.json of a shard directory written
// in place, absent until the run wrote it.
struct InterruptReport {
  std::string program;           // "shardkit shard"
  std::string scope;             // e.g. "here (every rank removes its own)"; may be empty
  std::string state;             // e.g. "out still holds the earlier output, untouched"
  std::string state_if_removed;  // e.g. "out, which this run had created, is removed"
  std::string state_if_outputs_removed;
  std::string probe;
  std::string state_if_probe_present;
};

// The report the handler prints, for as long as it lives (the latest Set wins); none when it is
// destroyed. One at a time per process: the source rank of a run, or a gather. Not thread-safe
// itself (one owner); Set is safe against the handler. Each Set keeps its text until the process
// exits (a few hundred bytes), since the handler may be reading an older one.
class ScopedInterruptReport {
 public:
  ScopedInterruptReport() = default;
  ScopedInterruptReport(const ScopedInterruptReport&) = delete;
  ScopedInterruptReport& operator=(const ScopedInterruptReport&) = delete;
  ~ScopedInterruptReport();
  void Set(InterruptReport report);

 private:
  const InterruptReport* mine_ = nullptr;  // the latest this one set
};

// Installs the handler for SIGINT, SIGTERM and SIGHUP, except for a signal this process was
// started with ignored (nohup, a background job), which stays ignored. Call once, from main,
// before any thread starts. The launcher (integration/launch) replaces these handlers for as long
// as it supervises ranks, and restores them afterwards.
void InstallInterruptHandlers();

// Removes directory `path` if it is empty, retrying for up to `settle_ms` while it is not.
// Returns true if it was removed. Async-signal-safe (the handler uses it too).
bool RemoveEmptyDirectory(const char* path, int settle_ms);

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_INTERRUPT_H_
