#include "integration/formats/output_file/output_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"
#include "core/os/swap_dir.h"
#include "integration/formats/output_file/internal/beside.h"

namespace shardkit::formats {
namespace {

using internal::CanSwapInto;
using internal::kNewInfix;
using internal::kOldInfix;
using internal::RecoverSetAside;
using internal::RemoveBesideOf;

namespace fs = std::filesystem;

// A file of one of `kinds`' outputs, or a temporary name of one (os::AtomicFile's).
bool IsOutputFile(const OutputKinds& kinds, std::string_view name) {
  for (const OutputKind* kind : kinds) {
    if (kind->IsOutputFile(name)) return true;
  }
  return false;
}

bool IsOutputEntry(const OutputKinds& kinds, std::string_view name) {
  const std::optional<os::TemporaryName> temp = os::ParseTemporaryName(name);
  return IsOutputFile(kinds, temp ? temp->base : name);
}

absl::Status ListError(const std::string& dir, const std::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat(dir, ": cannot list the output directory: ", ec.message()));
}

// Whether `path` is a mount point of the file system its parent is on too (a bind mount): the
// mount ids of the two differ (statx, Linux 5.8+; false where the kernel cannot tell).
bool IsMountPoint(const std::string& path) {
  struct statx here {
  }, parent{};
  const std::string up = fs::path(path).parent_path().string();
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_MNT_ID, &here) != 0 ||
      ::statx(AT_FDCWD, up.c_str(), 0, STATX_MNT_ID, &parent) != 0) {
    return false;
  }
  return (here.stx_mask & parent.stx_mask & STATX_MNT_ID) != 0 &&
         here.stx_mnt_id != parent.stx_mnt_id;
}

// 16 random hex digits: the new directory's name, unique per run.
std::string RandomSuffix() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

// Whether `name` is the marker of one of `kinds`.
bool IsMarker(const OutputKinds& kinds, std::string_view name) {
  for (const OutputKind* kind : kinds) {
    if (!kind->marker().empty() && kind->marker() == name) return true;
  }
  return false;
}

// Removes DIR's output files but a running process's temporaries (named in `left_alone`; the lock
// stays), the markers last: while any output file is left, they say whose they are.
absl::Status RemoveOutputFiles(const std::string& dir, const OutputKinds& kinds,
                               std::vector<std::string>* left_alone) {
  SHARDKIT_RETURN_IF_ERROR(
      os::RemoveDeadTemporaries(
          dir, [&kinds](std::string_view name) { return IsOutputFile(kinds, name); }, left_alone)
          .status());
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsOutputFile(kinds, name) && !IsMarker(kinds, name)) files.push_back(it->path());
  }
  if (ec) return ListError(dir, ec);
  for (const OutputKind* kind : kinds) {
    if (!kind->marker().empty()) files.push_back(fs::path(dir) / std::string(kind->marker()));
  }
  for (const fs::path& path : files) {
    if (!fs::remove(path, ec) && ec) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ": cannot remove: ", ec.message()));
    }
  }
  return os::SyncDirectory(dir);
}

}  // namespace

absl::StatusOr<OutputContents> ExamineOutputDir(const std::string& dir, const OutputKinds& kinds) {
  OutputContents contents;
  std::error_code ec;
  if (fs::status(dir, ec).type() == fs::file_type::not_found) return contents;
  std::vector<std::vector<std::string>> names(kinds.size());  // per kind, its files
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == os::kLockFileName) continue;
    if (!IsOutputEntry(kinds, name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": holds \"", name,
          "\", which is not shardkit output (shardkit replaces only its own output: use a new or "
          "empty directory, or one holding only an earlier shardkit output)"));
    }
    contents.any = true;
    if (os::ParseTemporaryName(name)) continue;
    for (size_t k = 0; k < kinds.size(); ++k) {
      if (kinds[k]->IsOutputFile(name)) names[k].push_back(name);
    }
  }
  if (ec) return ListError(dir, ec);
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (names[k].empty()) continue;
    SHARDKIT_ASSIGN_OR_RETURN(const bool complete, kinds[k]->Examine(dir, names[k]));
    contents.complete = contents.complete || complete;
  }
  return contents;
}

absl::StatusOr<OutputDirectory> OutputDirectory::Prepare(const std::string& dir,
                                                         const OutputKind& writing,
                                                         OutputKinds known, bool owner) {
  OutputDirectory out;
  out.dir_ = dir;
  out.write_dir_ = dir;
  out.writing_ = &writing;
  out.known_ = std::move(known);
  out.owner_ = owner;
  if (owner) {
    RecoverSetAside(dir, out.known_);
    SHARDKIT_ASSIGN_OR_RETURN(out.created_, os::CreatedDirectories::Make(dir));
  }
  absl::StatusOr<OutputContents> contents = ExamineOutputDir(dir, out.known_);
  if (!contents.ok()) {
    out.created_.RemoveIfEmpty();
    return contents.status();
  }
  out.contents_ = *contents;
  return out;
}

std::string OutputDirectory::last_file_name() const {
  return std::string(writing_->last_file_name());
}

absl::Status OutputDirectory::Begin() {
  SHARDKIT_ASSIGN_OR_RETURN(lock_, os::DirectoryLock::Acquire(dir_));
  created_.AddOwnFile(lock_->path());  // removed with DIR, if this run created DIR
  SHARDKIT_ASSIGN_OR_RETURN(contents_, ExamineOutputDir(dir_, known_));  // again, under the lock
  std::error_code ec;
  real_ = fs::canonical(dir_, ec).string();
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(dir_, ": cannot resolve: ", ec.message()));
  }
  // An earlier output set aside is debris only once DIR holds a complete one again.
  if (real_ != "/") RemoveBesideOf(real_, /*set_aside=*/contents_.complete);
  SHARDKIT_RETURN_IF_ERROR(contents_.complete ? ChooseReplacing() : ClearInPlace());
  SetReport(/*committed=*/false);
  return writing_->WriteMarker(write_dir_);
}

absl::Status OutputDirectory::ClearInPlace() {
  cleared_ = true;  // DIR was examined under the lock: its output files are an earlier run's
  if (!contents_.any) return absl::OkStatus();
  std::vector<std::string> left;
  SHARDKIT_RETURN_IF_ERROR(RemoveOutputFiles(dir_, known_, &left));
  for (const std::string& name : left) warnings_.push_back(os::LeftAloneWarning(dir_, name));
  return absl::OkStatus();
}

absl::Status OutputDirectory::ChooseReplacing() {
  const fs::path real(real_);
  const auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir_,
        ": holds an earlier shardkit output, which a run replaces only by writing the new "
        "output beside it and swapping the two, and ",
        why, ": remove the earlier output first, or use a new directory"));
  };
  if (real_ == "/") return refuse("/ has no directory beside it");
  struct stat here {
  }, parent{};
  if (::stat(real_.c_str(), &here) != 0 || ::stat(real.parent_path().c_str(), &parent) != 0) {
    return refuse(absl::StrCat("it cannot be examined (", os::ErrnoText(errno), ")"));
  }
  if (here.st_dev != parent.st_dev || IsMountPoint(real_)) {
    return refuse(absl::StrCat(real_, " is a mount point (nothing beside it is on its disk)"));
  }
  // Another user's DIR in a sticky parent (/tmp): only its owner may rename it.
  if ((parent.st_mode & S_ISVTX) != 0 && ::geteuid() != 0 && here.st_uid != ::geteuid() &&
      parent.st_uid != ::geteuid()) {
    return refuse(
        absl::StrCat(real.parent_path().string(), " is sticky and another user owns ", real_));
  }
  suffix_ = RandomSuffix();
  place_ = absl::StrCat(".", real.filename().string(), kNewInfix, suffix_);
  write_dir_ = (real.parent_path() / place_).string();
  absl::StatusOr<os::InterruptCleanup> registered = os::InterruptCleanup::Register(
      write_dir_, os::CleanupKind::kDirectory, [&]() -> absl::Status {
        if (::mkdir(write_dir_.c_str(), here.st_mode & 07777) != 0) {
          return refuse(
              absl::StrCat("cannot create ", write_dir_, " (", os::ErrnoText(errno), ")"));
        }
        // DIR's mode (not narrowed by the umask) and, where allowed, its owner and group: best
        // effort (a run that may not give the directory DIR's owner keeps its own).
        (void)::chmod(write_dir_.c_str(), here.st_mode & 07777);
        [[maybe_unused]] const int owned = ::chown(write_dir_.c_str(), here.st_uid, here.st_gid);
        return absl::OkStatus();
      });
  if (!registered.ok()) {
    place_.clear();
    write_dir_ = dir_;
    return registered.status();
  }
  staging_cleanup_ = *std::move(registered);
  absl::StatusOr<bool> exchanges = CanSwapInto(write_dir_, real_, suffix_);
  if (!exchanges.ok()) return refuse(std::string(exchanges.status().message()));
  exchanges_ = *exchanges;
  return absl::OkStatus();
}

absl::Status OutputDirectory::Follow(std::string_view place) {
  place_ = std::string(place);
  if (place_.empty()) {
    write_dir_ = dir_;
    // The owner saw no complete output; one here is another disk's, which writing in place would
    // mix with this run's files.
    SHARDKIT_ASSIGN_OR_RETURN(contents_, ExamineOutputDir(dir_, known_));
    if (contents_.complete) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir_,
          ": holds a complete earlier output on this rank that the source rank does not "
          "see (not a file system every rank shares): replacing it needs one; remove it "
          "or write to a new directory"));
    }
    SHARDKIT_ASSIGN_OR_RETURN(created_, os::CreatedDirectories::Make(dir_));
    return absl::OkStatus();
  }
  std::error_code ec;
  real_ = fs::canonical(dir_, ec).string();
  write_dir_ = ec ? "" : (fs::path(real_).parent_path() / place_).string();
  if (!ec && fs::is_directory(write_dir_, ec)) return absl::OkStatus();
  const std::string missing = write_dir_;
  place_.clear();
  write_dir_ = dir_;
  return absl::InvalidArgumentError(absl::StrCat(
      dir_, ": the run replaces the earlier output there by writing beside it, in ",
      missing.empty() ? std::string(place) : missing,
      ", which this rank does not see: replacing an output needs a file system every rank "
      "shares; write to a new directory, or remove the earlier output first"));
}

absl::Status OutputDirectory::Commit() {
  if (!replacing()) {
    committed_ = true;
    created_.Keep();
    SetReport(/*committed=*/true);
    lock_.reset();
    return absl::OkStatus();
  }
  // The lock file goes with the earlier output: the handler must not remove DIR/.shardkit.lock,
  // which may be another run's by then.
  lock_->DetachFromInterrupt();
  SHARDKIT_RETURN_IF_ERROR(exchanges_ ? Exchange() : SetAsideAndMove());
  // Now only the earlier output is left to remove, from where it went (its lock file with it).
  os::RemoveTree(exchanges_ ? write_dir_ : SetAsidePath());
  lock_.reset();  // its file is gone: nothing else to remove
  return os::SyncDirectory(fs::path(real_).parent_path().string());
}

// The commit where the file system exchanges: one atomic step. Interrupts wait (the report must
// change with it).
absl::Status OutputDirectory::Exchange() {
  os::ScopedInterruptBlock block;
  SHARDKIT_RETURN_IF_ERROR(os::ExchangeDirectories(write_dir_, real_));
  MarkCommitted();
  return absl::OkStatus();
}

// The commit elsewhere (NFS): DIR aside, the new output in its place — a reader sees no DIR for
// that instant; a run killed between the two leaves the earlier output beside DIR, which the next
// run into DIR puts back (RecoverSetAside). Interrupts wait until both are done.
absl::Status OutputDirectory::SetAsideAndMove() {
  os::ScopedInterruptBlock block;
  const std::string aside = SetAsidePath();
  if (::rename(real_.c_str(), aside.c_str()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot set ", real_, " aside to ", aside, ": ", os::ErrnoText(errno)));
  }
  if (::rename(write_dir_.c_str(), real_.c_str()) != 0) {
    const int err = errno;
    const bool back = ::rename(aside.c_str(), real_.c_str()) == 0;
    return absl::InvalidArgumentError(
        absl::StrCat("cannot move ", write_dir_, " to ", real_, ": ", os::ErrnoText(err),
                     back ? ""
                          : absl::StrCat("; the earlier output is at ", aside,
                                         ", which the next run into ", dir_, " puts back")));
  }
  MarkCommitted();
  return absl::OkStatus();
}

std::string OutputDirectory::SetAsidePath() const {
  const fs::path real(real_);
  return (real.parent_path() / absl::StrCat(".", real.filename().string(), kOldInfix, suffix_))
      .string();
}

void OutputDirectory::MarkCommitted() {
  committed_ = true;
  staging_cleanup_.Release();
  SetReport(/*committed=*/true);
}

void OutputDirectory::Abandon() {
  if (committed_) return;
  if (owner_ && replacing()) {
    os::RemoveTree(write_dir_);
    staging_cleanup_.Release();
  } else if (owner_ && cleared_) {
    (void)RemoveOutputFiles(dir_, known_, nullptr);  // best effort: the run failed already
  }
  created_.RemoveIfEmpty();  // the lock file first, while it is still held
  lock_.reset();
  report_.reset();
}

void OutputDirectory::ReportInterrupts(std::string program, std::string scope) {
  program_ = std::move(program);
  scope_ = std::move(scope);
  report_ = std::make_unique<os::ScopedInterruptReport>();
  report_->Set({.program = program_,
                .scope = scope_,
                .state = contents_.complete ? Untouched() : NoOutput(),
                .state_if_removed = Removed()});
}

// What DIR holds, in the words of the interrupt line.
std::string OutputDirectory::Untouched() const {
  return absl::StrCat(dir_, " still holds the earlier output, untouched");
}
std::string OutputDirectory::NoOutput() const {
  return absl::StrCat(dir_, " holds no ", last_file_name(), " (nor did it before this run)");
}
std::string OutputDirectory::Removed() const {
  return absl::StrCat(dir_, ", which this run had created, is removed");
}

void OutputDirectory::SetReport(bool committed) {
  if (!report_) return;
  const std::string done = absl::StrCat(dir_, " holds the complete new output");
  if (committed) {
    report_->Set({.program = program_, .scope = scope_, .state = done});
    return;
  }
  if (replacing()) {  // the commit changes the report while interrupts wait
    report_->Set(
        {.program = program_,
         .scope = scope_,
         .state = absl::StrCat(Untouched(), " (", write_dir_, " beside it goes with the next run)"),
         .state_if_removed = Untouched()});
    return;
  }
  report_->Set({.program = program_,
                .scope = scope_,
                .state = NoOutput(),
                .state_if_removed = Removed(),
                .probe = (fs::path(write_dir_) / last_file_name()).string(),
                .state_if_probe_present = done});
}

}  // namespace shardkit::formats
